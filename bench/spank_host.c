/* A stand-in slurmstepd for the launch bench (bench/launch_cost.py): it exports the few
 * SPANK and libslurm calls a plugin uses, dlopens the plugin as slurmstepd does (RTLD_LAZY, as Slurm's plugin loader), and runs
 * one step on one node (S_CTX_REMOTE) with TASKS tasks, timing each callback:
 *   dlopen, init (the config), init_post_opt, user_init, per task: fork + task_post_fork +
 *   task_init + _exit + wait against fork + _exit + wait alone (before the plugin is loaded, and again
 *   after user_init: a bigger process forks and exits slower), task_exit, exit.
 * Each run is a fresh process, as each slurmstepd is. No Slurm is needed; the numbers are
 * what the plugin itself costs, without Slurm's own launch around it.
 *
 *   spank_host PLUGIN TASKS [plugstack arguments...]
 * prints one line: name=milliseconds ... The tasks' stdout and stderr are one pipe (as a
 * step's are, towards srun), drained here. GPUDIAG_HOST_NODELIST sets the step's nodelist
 * (unset: no nodelist, so no MASTER_ADDR and no rendezvous check). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

static int g_tasks = 1;
static int g_task_id = -1; /* the task whose callbacks run now */
static char* g_env[256];
static int g_nenv;
static char* g_argv[] = {"true", NULL};
static char g_nodename[256] = "localhost"; /* this host's short name, as Slurm names nodes */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void env_put(const char* name, const char* value) {
  size_t n = strlen(name);
  for (int i = 0; i < g_nenv; ++i)
    if (strncmp(g_env[i], name, n) == 0 && g_env[i][n] == '=') {
      free(g_env[i]);
      if (asprintf(&g_env[i], "%s=%s", name, value) < 0) abort();
      return;
    }
  if (g_nenv + 1 >= (int)(sizeof g_env / sizeof g_env[0])) return;
  if (asprintf(&g_env[g_nenv++], "%s=%s", name, value) < 0) abort();
  g_env[g_nenv] = NULL;
}

/* --- what slurmstepd exports to a plugin --- */
spank_context_t spank_context(void) { return S_CTX_REMOTE; }

spank_err_t spank_option_register(spank_t sp, struct spank_option* opt) {
  (void)sp;
  (void)opt;
  return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...) {
  (void)sp;
  va_list ap;
  va_start(ap, item);
  spank_err_t rc = ESPANK_SUCCESS;
  switch (item) {
    case S_JOB_ID: *va_arg(ap, uint32_t*) = 1000; break;
    case S_JOB_STEPID: *va_arg(ap, uint32_t*) = 0; break;
    case S_JOB_NODEID: *va_arg(ap, uint32_t*) = 0; break;
    case S_JOB_NNODES: *va_arg(ap, uint32_t*) = 1; break;
    case S_JOB_LOCAL_TASK_COUNT:
    case S_JOB_TOTAL_TASK_COUNT: *va_arg(ap, uint32_t*) = (uint32_t)g_tasks; break;
    case S_TASK_GLOBAL_ID: *va_arg(ap, uint32_t*) = (uint32_t)g_task_id; break;
    case S_TASK_ID: *va_arg(ap, int*) = g_task_id; break;
    case S_JOB_LOCAL_TO_GLOBAL_ID: {
      uint32_t local = va_arg(ap, uint32_t);
      uint32_t* global = va_arg(ap, uint32_t*);
      if ((int)local < g_tasks) *global = local;
      else rc = ESPANK_NOEXIST;
      break;
    }
    case S_JOB_UID: *va_arg(ap, uid_t*) = getuid(); break;
    case S_JOB_ENV: *va_arg(ap, char***) = g_env; break;
    case S_JOB_ARGV:
      *va_arg(ap, int*) = 1;
      *va_arg(ap, char***) = g_argv;
      break;
    default: rc = ESPANK_BAD_ARG;
  }
  va_end(ap);
  if ((item == S_TASK_ID || item == S_TASK_GLOBAL_ID) && g_task_id < 0) rc = ESPANK_NOT_TASK;
  return rc;
}

spank_err_t spank_getenv(spank_t sp, const char* var, char* buf, int len) {
  (void)sp;
  size_t n = strlen(var);
  for (int i = 0; i < g_nenv; ++i)
    if (strncmp(g_env[i], var, n) == 0 && g_env[i][n] == '=') {
      if ((int)strlen(g_env[i] + n + 1) >= len) return ESPANK_NOSPACE;
      strcpy(buf, g_env[i] + n + 1);
      return ESPANK_SUCCESS;
    }
  return ESPANK_ENV_NOEXIST;
}

/* As Slurm's setenvf: the value is formatted into a cleared 256 KiB buffer first. */
spank_err_t spank_setenv(spank_t sp, const char* var, const char* val, int overwrite) {
  char buf[8192];
  if (!overwrite && spank_getenv(sp, var, buf, sizeof buf) == ESPANK_SUCCESS) return ESPANK_ENV_EXISTS;
  char* value = calloc(1, 256 * 1024);
  if (!value) abort();
  snprintf(value, 256 * 1024, "%s", val);
  env_put(var, value);
  free(value);
  return ESPANK_SUCCESS;
}

void slurm_info(const char* fmt, ...) { (void)fmt; }
void slurm_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("spank_host: plugin error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}
char* slurm_strerror(int errnum) { return strerror(errnum); }

/* A hostlist of plain comma-separated names is enough here. */
struct hostlist {
  char* text;
  char* next;
};
hostlist_t slurm_hostlist_create(const char* list) {
  struct hostlist* hl = calloc(1, sizeof *hl);
  hl->text = strdup(list);
  hl->next = hl->text;
  return hl;
}
char* slurm_hostlist_shift(hostlist_t hl) {
  if (!hl->next || !*hl->next) return NULL;
  char* start = hl->next;
  char* comma = strchr(start, ',');
  if (comma) *comma = '\0';
  hl->next = comma ? comma + 1 : NULL;
  return strdup(start);
}
void slurm_hostlist_destroy(hostlist_t hl) {
  free(hl->text);
  free(hl);
}

/* --- one step --- */
typedef int (*callback_f)(spank_t, int, char**);

static callback_f sym(void* h, const char* name) {
  union {
    void* p;
    callback_f f;
  } u;
  u.p = dlsym(h, name);
  return u.f;
}

static void drain(int fd) {
  char buf[65536];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

static double self_cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Per task, the mean over the tasks: wall ms of the node's launch (fork, task_post_fork,
 * task_init, _exit, waitpid), the CPU ms of both sides (this process's forks and waits, the
 * children's runs and exits) and the child's minor page faults (what a fork's shared pages
 * cost when touched). As slurmstepd's _fork_all_tasks does: every task is forked first and
 * waits for a byte on a pipe; then task_post_fork runs for each in this process; then all
 * are released to run task_init (and exec, here _exit). */
struct per_task {
  double wall_ms, cpu_ms, faults, exit_ms;
};

static struct per_task run_tasks(callback_f task_init, callback_f post_fork, callback_f task_exit, int out_fd,
                                 int drain_fd) {
  struct per_task r = {0, 0, 0, 0};
  int release[2];
  if (pipe(release) != 0) abort();
  pid_t pids[g_tasks];
  double t0 = now_ms(), self0 = self_cpu_ms();
  for (int t = 0; t < g_tasks; ++t) {
    pid_t pid = fork();
    if (pid == 0) {
      close(release[1]);
      char go;
      if (read(release[0], &go, 1) != 1) _exit(2);
      dup2(out_fd, 1);
      dup2(out_fd, 2);
      g_task_id = t;
      /* What slurmstepd's exec_task sets in each task before task_init (bare tasks too, so
       * that the difference is the plugin's alone). */
      char id[16];
      snprintf(id, sizeof id, "%d", t);
      env_put("SLURM_PROCID", id);
      env_put("SLURM_LOCALID", id);
      env_put("SLURMD_NODENAME", g_nodename);
      int rc = task_init ? task_init(NULL, 0, NULL) : 0;
      _exit(rc == 0 ? 0 : 1);
    }
    pids[t] = pid;
  }
  for (int t = 0; post_fork && t < g_tasks; ++t) {
    g_task_id = t;
    post_fork(NULL, 0, NULL);
    g_task_id = -1;
  }
  for (int t = 0; t < g_tasks; ++t)
    if (write(release[1], "g", 1) != 1) abort();
  close(release[0]);
  close(release[1]);
  for (int t = 0; t < g_tasks; ++t) {
    int status = 0;
    struct rusage ru;
    wait4(pids[t], &status, 0, &ru);
    r.cpu_ms += (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    r.faults += (double)ru.ru_minflt;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fprintf(stderr, "spank_host: task %d failed\n", t);
    drain(drain_fd);
    if (task_exit) {
      double e0 = now_ms();
      g_task_id = t;
      task_exit(NULL, 0, NULL);
      g_task_id = -1;
      r.exit_ms += now_ms() - e0;
    }
  }
  r.wall_ms = now_ms() - t0 - r.exit_ms;
  r.cpu_ms += self_cpu_ms() - self0;  /* the forks' copies of the address space, the waits */
  r.wall_ms /= g_tasks;
  r.cpu_ms /= g_tasks;
  r.faults /= g_tasks;
  r.exit_ms /= g_tasks;
  return r;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: spank_host PLUGIN TASKS [plugstack arguments...]\n");
    return 2;
  }
  g_tasks = atoi(argv[2]);
  if (g_tasks < 1) g_tasks = 1;
  char ntasks[16];
  snprintf(ntasks, sizeof ntasks, "%d", g_tasks);
  if (gethostname(g_nodename, sizeof g_nodename - 1) == 0) g_nodename[strcspn(g_nodename, ".")] = '\0';
  env_put("PATH", "/usr/bin:/bin");
  env_put("SLURM_JOB_ID", "1000");
  env_put("SLURM_STEP_ID", "0");
  env_put("SLURM_NTASKS", ntasks);
  env_put("SLURM_NNODES", "1");
  const char* nodes = getenv("GPUDIAG_HOST_NODELIST");
  if (nodes && *nodes) {
    env_put("SLURM_JOB_NODELIST", nodes);
    env_put("SLURM_STEP_NODELIST", nodes);
    env_put("SLURM_NODELIST", nodes);
  }
  const char* diag = getenv("GPUDIAG_HOST_DIAG");
  if (diag) env_put("GPUDIAG_DIAG", diag);

  int fds[2];
  if (pipe(fds) != 0) return 1;
  fcntl(fds[0], F_SETFL, O_NONBLOCK);

  /* fork + _exit + wait alone, before the plugin is loaded: what a task costs without it */
  struct per_task bare = run_tasks(NULL, NULL, NULL, fds[1], fds[0]);

  double t0 = now_ms();
  void* h = dlopen(argv[1], RTLD_LAZY);
  double t_dlopen = now_ms() - t0;
  if (!h) {
    fprintf(stderr, "spank_host: %s\n", dlerror());
    return 1;
  }
  callback_f init = sym(h, "slurm_spank_init"), post = sym(h, "slurm_spank_init_post_opt"),
          user = sym(h, "slurm_spank_user_init"), task = sym(h, "slurm_spank_task_init"),
          fork_done = sym(h, "slurm_spank_task_post_fork"), texit = sym(h, "slurm_spank_task_exit"),
          fini = sym(h, "slurm_spank_exit");
  double t_init = 0, t_post = 0, t_user = 0, t_exit = 0;
  t0 = now_ms();
  if (init && init(NULL, argc - 3, argv + 3) != 0) fprintf(stderr, "spank_host: init failed\n");
  t_init = now_ms() - t0;
  t0 = now_ms();
  if (post && post(NULL, 0, NULL) != 0) fprintf(stderr, "spank_host: init_post_opt failed\n");
  t_post = now_ms() - t0;
  t0 = now_ms();
  if (user) user(NULL, 0, NULL);
  t_user = now_ms() - t0;
  /* the same bare tasks again, now that slurmstepd carries the plugin, its libraries and
   * its threads: what every fork and exit of a task pays for them */
  struct per_task bare_after = run_tasks(NULL, NULL, NULL, fds[1], fds[0]);
  struct per_task tasks = run_tasks(task, fork_done, texit, fds[1], fds[0]);
  t0 = now_ms();
  if (fini) fini(NULL, 0, NULL);
  t_exit = now_ms() - t0;
  drain(fds[0]);
  printf("dlopen=%.3f init=%.3f init_post_opt=%.3f user_init=%.3f task=%.3f bare_task=%.3f task_cpu=%.3f "
         "bare_task_cpu=%.3f task_faults=%.1f bare_task_faults=%.1f bare_after=%.3f bare_after_cpu=%.3f "
         "task_exit=%.3f exit=%.3f\n",
         t_dlopen, t_init, t_post, t_user, tasks.wall_ms, bare.wall_ms, tasks.cpu_ms, bare.cpu_ms, tasks.faults,
         bare.faults, bare_after.wall_ms, bare_after.cpu_ms, tasks.exit_ms, t_exit);
  return 0;
}
