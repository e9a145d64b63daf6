// gpudiag.so: the SPANK plugin (DESIGN §3). Every callback catches everything: no
// exception may cross into srun or slurmstepd, and a failure is a clear message,
// never a crash.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "nodeinfo/config.h"
#include "nodeinfo/ib_discovery.h"
#include "spank/diag_dir.h"
#include "spank/diag_options.h"
#include "spank/dist_env.h"
#include "spank/env_writer.h"
#include "spank/failfast_env.h"
#include "spank/nccl_defaults.h"
#include "spank/output_relay.h"
#include "spank/preflight.h"
#include "spank/step_summary.h"
#include "spank/plugin_args.h"

// SPANK_PLUGIN() gives these internal linkage in C++: declare them by hand.
extern "C" {
extern const char plugin_name[] = "gpudiag";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

using gpudiag::Config;
using gpudiag::DiagOptions;

// Step ids that are not srun steps: no per-task values go there (DESIGN §3).
constexpr std::uint32_t kBatchStep = 0xfffffffb;
constexpr std::uint32_t kExternStep = 0xfffffffc;
constexpr std::uint32_t kInteractiveStep = 0xfffffffa;

// One per process: srun, sbatch and each slurmstepd load the plugin on their own.
struct State {
  Config cfg;
  DiagOptions diag;         // from GPUDIAG_DIAG, then --diag
  bool diag_option = false; // --diag was given
  std::string diag_arg;     // its argument
  std::string ib_hca;       // NCCL_IB_HCA=auto, resolved once per step and node
  gpudiag::EnvList nccl_env;
  // srun only: which step this is, for the summary at its end.
  std::uint32_t job_id = 0, step_id = 0;
  bool have_step = false;
  uid_t job_uid = 0;  // whose diag dir it is (srun as root may run tasks as a user)
  // slurmstepd only: why gpudiag cannot run this step. A failure in init or
  // init_post_opt on the node is "launch failed" with exit 0 in srun (22.05), so it is
  // kept here and fails each task in task_init, where the task exits non-zero and the
  // message reaches the user's terminal (issue 21.3).
  std::string remote_error;
};
State g;

int diag_option_cb(int val, const char* optarg, int remote);

// Every entry point from Slurm goes through here: no exception may cross into srun or
// slurmstepd. `on_error` is what Slurm gets back if one is thrown.
template <class F>
int guarded(const char* where, int on_error, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("gpudiag: %s: %s", where, e.what());
  } catch (...) {
    slurm_error("gpudiag: %s: unexpected error", where);
  }
  return on_error;
}

// Every option in one table, registered in a loop (the model is pyxis). The help text
// is the parser's own list of items, filled in before registration.
std::string g_diag_help;
struct spank_option kOptions[] = {
    {const_cast<char*>("diag"), const_cast<char*>("[LIST]"), nullptr, 2, 0, diag_option_cb},
};

// Where slurmstepd cannot fail usefully (see State::remote_error), keep the first error.
int remote_failure(const std::string& message) {
  slurm_error("%s", message.c_str());
  if (g.remote_error.empty()) g.remote_error = message;
  return 0;
}

// Callbacks can fire twice: parse from scratch each time so the result is the same.
int diag_option_cb(int, const char* optarg, int remote) {
  return guarded("--diag", -1, [&] {
    g.diag_option = true;
    g.diag_arg = optarg ? optarg : "";
    auto parsed = gpudiag::parse_diag_list(g.diag_arg);
    if (!parsed) {
      if (remote) return remote_failure(parsed.error());
      slurm_error("%s", parsed.error().c_str());
      return -1;
    }
    g.diag = *parsed;
    return 0;
  });
}

class SpankEnv : public gpudiag::EnvTarget {
 public:
  explicit SpankEnv(spank_t sp) : sp_(sp) {}
  std::optional<std::string> get(const std::string& name) override {
    std::vector<char> buf(gpudiag::kMaxDiagListBytes + 1);
    spank_err_t rc = spank_getenv(sp_, name.c_str(), buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buf.data());
    if (rc == ESPANK_NOSPACE) return std::string("(too long)");  // present: the user's
    return std::nullopt;
  }
  bool set(const std::string& name, const std::string& value) override {
    return spank_setenv(sp_, name.c_str(), value.c_str(), 1) == ESPANK_SUCCESS;
  }

 private:
  spank_t sp_;
};

template <class T>
bool item(spank_t sp, spank_item_t what, T& out) {
  return spank_get_item(sp, what, &out) == ESPANK_SUCCESS;
}

std::string first_host(const std::string& nodelist) {
  if (nodelist.empty()) return "";
  // The hostlist type changed in 23.11 (a struct, taken by pointer); `auto` compiles
  // against both.
  auto hl = slurm_hostlist_create(nodelist.c_str());
  if (!hl) return "";
  char* host = slurm_hostlist_shift(hl);
  std::string out = host ? host : "";
  free(host);
  slurm_hostlist_destroy(hl);
  return out;
}

int visible_gpus(gpudiag::EnvTarget& env) {
  auto cvd = env.get("CUDA_VISIBLE_DEVICES");
  if (!cvd || cvd->empty()) return 0;
  int n = 1;
  for (char c : *cvd) n += c == ',';
  return n;
}

// Loads the config named by the plugstack arguments. Errors are messages.
gpudiag::Result<Config> load(int ac, char** av) {
  std::vector<std::string> args(av, av + ac);
  auto parsed = gpudiag::parse_plugin_args(args);
  if (!parsed) return gpudiag::Result<Config>::failure(parsed.error());
  std::string path = parsed->config_given ? parsed->config : gpudiag::kDefaultConfigPath;
  struct stat st;
  if (!parsed->config_given && ::stat(path.c_str(), &st) != 0) return Config{};
  auto cfg = gpudiag::load_config_file(path);
  if (!cfg && ::access(path.c_str(), R_OK) != 0) {
    // srun reads it as the user, slurmstepd as root: a root-only file fails only in srun.
    const char* fix = errno == EACCES ? " (srun reads it as the user: make it readable by all users)"
                                      : " (fix config= on the gpudiag.so line in plugstack.conf)";
    return gpudiag::Result<Config>::failure(cfg.error() + fix);
  }
  return cfg;
}

// --diag=prefix/noprefix wins, then the site's plugin.prefix.
bool prefix_wanted(int world_size) {
  if (g.diag.prefix) return *g.diag.prefix;
  if (g.cfg.plugin.prefix == "always") return true;
  if (g.cfg.plugin.prefix == "never") return false;
  return world_size > 1;
}

// Only output that slurmstepd forwards to srun (a pipe or socket) gets a prefix: a
// regular file is a per-task output file (-o out.%t), a terminal is --pty.
bool forwarded_to_srun(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

// The watchdog's settings for this step: --diag items win over the site's.
gpudiag::HangWatch hang_watch(const gpudiag::TaskIds& t, const std::string& diag_dir, const std::string& host) {
  gpudiag::HangWatch w;
  w.duration_s = g.diag.hang_s.value_or(g.cfg.plugin.hang.duration_s);
  w.kill = g.diag.hang_action.value_or(g.cfg.plugin.hang.action) == "kill";
  w.cpu = g.cfg.plugin.hang.cpu;
  w.kill_grace_s = g.cfg.plugin.hang.kill_grace_s;
  w.step = std::to_string(t.job_id) + "." + std::to_string(t.step_id);
  w.state_dir = gpudiag::hang_state_dir(::getuid(), w.step);
  w.diag_dir = diag_dir;
  w.host = host;
  w.rank = t.rank;
  return w;
}

std::string short_host(gpudiag::EnvTarget& env) {
  std::string host = env.get("SLURMD_NODENAME").value_or("");
  if (host.empty()) {
    char buf[256] = {};
    ::gethostname(buf, sizeof buf - 1);
    host = buf;
  }
  return host.substr(0, host.find('.'));
}

void start_output_relay(gpudiag::EnvTarget& env, const gpudiag::TaskIds& t, const std::string& diag_dir) {
  const std::string host = short_host(env);
  gpudiag::RelayPlan plan;
  plan.hang = hang_watch(t, diag_dir, host);  // with no diag dir, its report goes to stderr
  const bool watch = plan.hang.duration_s > 0;
  // srun --label already tags lines.
  const bool tag = prefix_wanted(t.world_size) && env.get("SLURM_LABELIO").value_or("") != "1";
  plan.tag_out = tag && forwarded_to_srun(STDOUT_FILENO);
  plan.tag_err = tag && forwarded_to_srun(STDERR_FILENO);
  // The watchdog sees output on every stream that is not a terminal.
  plan.out = plan.tag_out || (watch && !::isatty(STDOUT_FILENO));
  plan.err = plan.tag_err || (watch && !::isatty(STDERR_FILENO));
  if (watch && !plan.out && !plan.err && g.diag.hang_s)
    slurm_error("gpudiag: hang=: no hang watchdog for task %d: its output goes to a terminal (srun --pty), "
                "which the watchdog cannot watch; run the step without --pty to have one",
                t.rank);
  if (!plan.out && !plan.err) return;
  plan.tag = gpudiag::expand_prefix_format(g.cfg.plugin.prefix_format, host, t.rank, t.local_rank);
  // Returns here in the program's process; the relay never comes back.
  if (auto err = gpudiag::start_relay(plan))
    slurm_error("gpudiag: task %d runs without the output relay (no prefix, no hang watchdog): %s", t.rank,
                err->c_str());
}

// Every task checks (it is cheap), so no task of a bad node starts the program; the
// first task of each node says why (slurm_error reaches the step's stderr and slurmd's log).
bool preflight_passes(gpudiag::EnvTarget& env, const gpudiag::TaskIds& t) {
  auto facts = gpudiag::gather_preflight(g.cfg.plugin.preflight, g.cfg.ib, short_host(env), env.get("SLURM_GPUS_ON_NODE"),
                                         env.get("CUDA_VISIBLE_DEVICES"), env.get("NCCL_SOCKET_IFNAME"));
  auto problems = gpudiag::evaluate_preflight(facts);
  if (problems.empty()) return true;
  if (t.local_rank == 0) {
    for (const auto& p : problems) slurm_error("%s", p.c_str());
  }
  return false;
}

int task_init(spank_t sp) {
  std::uint32_t job = 0, step = 0, nnodes = 1, nodeid = 0, local_count = 1, total = 1, global_id = 0;
  int local_id = 0;
  if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step)) return 0;
  // A batch script still runs: each srun in it then fails with the reason.
  if (step == kBatchStep || step == kExternStep || step == kInteractiveStep) return 0;
  if (!g.remote_error.empty()) {
    // Every task fails; the first of each node says why (slurmstepd adds a line per task).
    item(sp, S_TASK_ID, local_id);
    if (local_id == 0) slurm_error("%s", g.remote_error.c_str());
    return -1;
  }
  item(sp, S_JOB_NNODES, nnodes);
  item(sp, S_JOB_NODEID, nodeid);
  item(sp, S_JOB_LOCAL_TASK_COUNT, local_count);
  item(sp, S_JOB_TOTAL_TASK_COUNT, total);
  item(sp, S_TASK_GLOBAL_ID, global_id);
  item(sp, S_TASK_ID, local_id);

  SpankEnv env(sp);
  gpudiag::TaskIds t;
  t.job_id = job;
  t.step_id = step;
  t.rank = static_cast<int>(global_id);
  t.world_size = static_cast<int>(total);
  t.local_rank = local_id;
  t.local_world_size = static_cast<int>(local_count);
  t.node_rank = static_cast<int>(nodeid);
  t.num_nodes = static_cast<int>(nnodes);
  auto nodelist = env.get("SLURM_STEP_NODELIST");
  if (!nodelist) nodelist = env.get("SLURM_JOB_NODELIST");
  t.master_addr = first_host(nodelist.value_or(""));
  int gpus = visible_gpus(env);
  t.nproc_per_node = g.cfg.plugin.nproc_per_node > 0 ? g.cfg.plugin.nproc_per_node : (gpus > 0 ? gpus : 1);

  gpudiag::PortRange range{g.cfg.plugin.master_port_first, g.cfg.plugin.master_port_last};
  gpudiag::EnvList wanted;
  if (g.cfg.plugin.torch_env && !t.master_addr.empty()) {
    auto e = gpudiag::torch_env(t, range);
    wanted.insert(wanted.end(), e.begin(), e.end());
  }
  if (g.cfg.plugin.torchrun_env && !t.master_addr.empty()) {
    auto e = gpudiag::torchrun_env(t, range);
    wanted.insert(wanted.end(), e.begin(), e.end());
  }
  wanted.insert(wanted.end(), g.nccl_env.begin(), g.nccl_env.end());
  bool hang_on = g.diag.hang_s.value_or(g.cfg.plugin.hang.duration_s) > 0;
  std::string dir;
  if (g.diag.enabled || hang_on) {
    // The hang watchdog's report needs the diag dir even when the site turned it on.
    char cwd[4096];
    dir = g.diag.dir.empty() ? gpudiag::default_diag_dir(env.get("SLURM_SUBMIT_DIR").value_or(""),
                                                         ::getcwd(cwd, sizeof cwd) ? cwd : "", job, step)
                             : g.diag.dir;
    // task_init runs as the user: the directory is the user's, and a place the user
    // may not write is refused by the kernel, not by us as root.
    if (auto problem = gpudiag::claim_diag_dir(dir, ::getuid())) {
      auto verdict = gpudiag::judge_diag_dir_problem(*problem, !g.diag.dir.empty(), g.diag.enabled, hang_on);
      if (verdict.fail_task) {
        slurm_error("%s", verdict.message.c_str());
        return -1;
      }
      if (local_id == 0) slurm_error("%s", verdict.message.c_str());
      dir.clear();
    }
    if (!dir.empty()) wanted.emplace_back("GPUDIAG_DIAG_DIR", dir);
  }
  if (g.diag.enabled && !dir.empty()) {
    wanted.emplace_back("NCCL_DEBUG", g.diag.nccl_level);
    wanted.emplace_back("NCCL_DEBUG_SUBSYS", g.diag.nccl_subsys);
    wanted.emplace_back("NCCL_DEBUG_FILE", dir + "/nccl.%h.%p.log");
    wanted.emplace_back("TORCH_DISTRIBUTED_DEBUG", "INFO");
  }
  auto failfast = gpudiag::failfast_env(g.cfg.plugin.failfast, dir, hang_on, &env);
  wanted.insert(wanted.end(), failfast.begin(), failfast.end());
  gpudiag::apply_env(env, wanted);
  if (g.diag.preflight.value_or(g.cfg.plugin.preflight.enabled) && !preflight_passes(env, t)) return -1;
  start_output_relay(env, t, dir);
  return 0;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", -1, [&] {
    const spank_context_t ctx = spank_context();
    if (g_diag_help.empty()) g_diag_help = gpudiag::diag_option_help();
    kOptions[0].usage = const_cast<char*>(g_diag_help.c_str());
    auto cfg = load(ac, av);
    if (!cfg && ctx == S_CTX_REMOTE) {
      // Registered all the same, so the step's --diag still parses on its way to task_init.
      for (auto& opt : kOptions) spank_option_register(sp, &opt);
      return remote_failure(cfg.error());
    }
    if (!cfg) {
      slurm_error("%s", cfg.error().c_str());
      // In slurmd and prolog/epilog contexts an error would take more than the user's
      // step down with it; there the message is enough.
      return (ctx == S_CTX_LOCAL || ctx == S_CTX_REMOTE || ctx == S_CTX_ALLOCATOR) ? -1 : 0;
    }
    g.cfg = *cfg;
    if (ctx == S_CTX_LOCAL || ctx == S_CTX_REMOTE || ctx == S_CTX_ALLOCATOR) {
      for (auto& opt : kOptions) {
        if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
          slurm_error("gpudiag: cannot register --%s", opt.name);
          return -1;
        }
      }
    }
    return 0;
  });
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  return guarded("options", -1, [&] {
    const spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE) return 0;
    // GPUDIAG_DIAG first, then --diag on top, item by item.
    std::string from_env;
    if (ctx == S_CTX_LOCAL) {
      const char* v = std::getenv("GPUDIAG_DIAG");
      if (v) from_env = v;
    } else {
      SpankEnv env(sp);
      from_env = env.get("GPUDIAG_DIAG").value_or("");
    }
    DiagOptions base;
    if (!from_env.empty()) {
      auto parsed = gpudiag::parse_diag_list(from_env);
      if (!parsed) {
        if (ctx == S_CTX_REMOTE) return remote_failure(parsed.error() + " (from GPUDIAG_DIAG)");
        slurm_error("%s (from GPUDIAG_DIAG)", parsed.error().c_str());
        return -1;
      }
      base = *parsed;
    }
    if (g.diag_option) {
      auto parsed = gpudiag::parse_diag_list(g.diag_arg, base);
      if (!parsed) {
        if (ctx == S_CTX_REMOTE) return remote_failure(parsed.error());
        slurm_error("%s", parsed.error().c_str());
        return -1;
      }
      base = *parsed;
    }
    g.diag = base;
    if (ctx == S_CTX_LOCAL && !g.diag.dir.empty()) {
      // srun runs as the user: a named dir the user cannot write fails here, once.
      if (auto why = gpudiag::judge_named_dir(g.diag.dir, gpudiag::read_named_dir_facts(g.diag.dir))) {
        slurm_error("%s", why->c_str());
        return -1;
      }
    }
    return 0;
  });
}

int slurm_spank_user_init(spank_t, int, char**) {
  // NCCL defaults are a convenience: never fail a job over them (on_error 0).
  return guarded("user init", 0, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    // Once per step and node, before the tasks fork: they inherit the result.
    gpudiag::RootedFs fs("/");
    g.nccl_env = gpudiag::nccl_defaults(g.cfg.plugin, gpudiag::discover_ib(fs), g.cfg.ib);
    return 0;
  });
}

int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return guarded("local user init", 0, [&] {
    if (spank_context() != S_CTX_LOCAL) return 0;
    g.have_step = spank_get_item(sp, S_JOB_ID, &g.job_id) == ESPANK_SUCCESS &&
                  spank_get_item(sp, S_JOB_STEPID, &g.step_id) == ESPANK_SUCCESS;
    if (spank_get_item(sp, S_JOB_UID, &g.job_uid) != ESPANK_SUCCESS) g.job_uid = ::getuid();
    return 0;
  });
}

// srun, after the step: what NCCL did, from the logs the tasks wrote (issue 7).
int slurm_spank_exit(spank_t, int, char**) {
  return guarded("exit", 0, [&] {
    if (spank_context() != S_CTX_LOCAL || !g.diag.enabled || !g.have_step) return 0;
    std::string dir = g.diag.dir;
    if (dir.empty()) {
      // The tasks' rule: srun hands them its own directory as $SLURM_SUBMIT_DIR.
      const char* submit = std::getenv("SLURM_SUBMIT_DIR");
      char cwd[4096];
      dir = gpudiag::default_diag_dir(submit ? submit : "", ::getcwd(cwd, sizeof cwd) ? cwd : "", g.job_id,
                                      g.step_id);
    }
    // The tasks did not use a dir whose name or owner is wrong, and said why; reading it
    // here would print control bytes, or summarize logs a neighbour planted.
    if (!gpudiag::safe_env_value(dir)) return 0;
    auto facts = gpudiag::read_dir_facts(dir);
    if (facts.exists && gpudiag::distrust_diag_dir(facts, g.job_uid)) return 0;
    std::string text = gpudiag::nccl_step_summary(dir);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    return 0;
  });
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("task init", 0, [&] { return task_init(sp); });
}

}  // extern "C"
