#include "spank/relay/output_relay.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "spank/watchdog/hang_watchdog.h"

namespace gpudiag {
namespace {

// Every signal someone may send a step, caught so that it never ends or stops the relay
// in the program's place: under proctrack/cgroup Slurm signals the relay alone, under
// pgid the relay too. Left out: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD (the
// relay's own), SIGPIPE (ignored: srun went away), SIGURG (the hang spread's,
// hang_spread.h), and the signals of the relay's own faults and limits (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS, SIGXCPU, SIGXFSZ), which must end it.
std::vector<int> forwarded_signals() {
  std::vector<int> out = {SIGHUP,  SIGINT,    SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM, SIGSTKFLT, SIGCONT,
                          SIGTSTP, SIGTTIN,   SIGTTOU, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO, SIGPWR};
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) out.push_back(s);
  return out;
}
// After the program exits, a grandchild that kept the pipes open must not keep the
// task alive: stop once the pipes stay empty this long, or at the latest after kDrainMax.
constexpr int kQuietMs = 200;
constexpr double kDrainMax = 5.0;
constexpr std::size_t kReadSize = 64 * 1024;

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_stepd = 0;
int g_wake_fd = -1;

void on_forwarded(int sig, siginfo_t* si, void*) {
  const int saved = errno;
  const bool sent = si->si_code == SI_USER || si->si_code == SI_QUEUE || si->si_code == SI_TKILL;
  if (g_child > 0 && sent && si->si_pid != g_stepd && si->si_pid != g_child) ::kill(g_child, sig);
  errno = saved;
}

void on_child(int) {
  const int saved = errno;
  const char b = 0;
  [[maybe_unused]] ssize_t n = ::write(g_wake_fd, &b, 1);
  errno = saved;
}

double now_s() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

void write_all(int fd, std::string_view data, bool& dead) {
  std::size_t off = 0;
  while (!dead && off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // srun went away: keep draining (so the program never blocks), drop the bytes.
      dead = true;
    }
  }
}

struct Stream {
  int in = -1;    // read end of the program's pipe
  int out = -1;   // where the relay writes: its own fd 1 or 2
  bool tag = true;
  LinePrefixer lines;
  bool dead = false;
  Stream(int in_fd, int out_fd, bool tag_lines, const RelayPlan& plan)
      : in(in_fd), out(out_fd), tag(tag_lines), lines(plan.tag, plan.max_line) {}
};

// Out of memory (the task's own) while tagging: the stream goes on untagged, after one
// notice and the partial line the tagging held, so that no byte is lost.
void stop_tagging(Stream& s) {
  write_all(s.out, kUntaggedNotice, s.dead);
  write_all(s.out, s.lines.held_bytes(), s.dead);
  s.tag = false;
}

// Room in `out` for what tagging `n` bytes (0: the stream's end) may add, so that the
// tagging itself allocates nothing (LinePrefixer::feed); false: out of memory, and the
// stream stopped tagging.
bool room_to_tag(Stream& s, std::string& out, std::size_t n) {
  try {
    out.clear();
    out.reserve(s.lines.max_output(n));
    return true;
  } catch (...) {
    stop_tagging(s);
    return false;
  }
}

// The relay is a copy of slurmstepd's task process and never execs: close what it
// inherited, so it holds no other task's pipe open.
void close_inherited(const std::vector<int>& keep) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  std::vector<int> doomed;
  const int dir_fd = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || end == e->d_name || fd < 3 || fd == dir_fd) continue;
    bool kept = false;
    for (int k : keep) kept |= k == fd;
    if (!kept) doomed.push_back(static_cast<int>(fd));
  }
  ::closedir(d);
  for (int fd : doomed) ::close(fd);
}

[[noreturn]] void mirror_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    // Die by the same signal, but leave no core of the relay behind.
    rlimit none{0, 0};
    ::setrlimit(RLIMIT_CORE, &none);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::kill(::getpid(), sig);
    ::_exit(128 + sig);
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

// The last resort when the relay fails outside the tagging (out of memory: the tagging's
// own is stop_tagging's): copy what is still to come from `in` (-1: none) to `dst` as it
// is, with no allocation, then exit as the program did (`status` if it was reaped).
[[noreturn]] void passthrough(pid_t child, int in_out, int in_err, const int dst[2], bool reaped = false,
                              int reaped_status = 0) noexcept {
  int in[2] = {in_out, in_err};
  bool dead[2] = {false, false};
  char buf[16384];
  while (in[0] >= 0 || in[1] >= 0) {
    pollfd fds[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i)
      if (in[i] >= 0) {
        fds[n] = {in[i], POLLIN, 0};
        which[n++] = i;
      }
    if (::poll(fds, n, 1000) < 0 && errno != EINTR) break;
    for (nfds_t k = 0; k < n; ++k) {
      const int i = which[k];
      ssize_t r = ::read(in[i], buf, sizeof buf);
      if (r > 0) {
        for (ssize_t off = 0; !dead[i] && off < r;) {
          ssize_t w = ::write(dst[i], buf + off, static_cast<std::size_t>(r - off));
          if (w > 0) off += w;
          else if (!(w < 0 && errno == EINTR)) dead[i] = true;
        }
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        ::close(in[i]);
        in[i] = -1;
      }
    }
  }
  int status = reaped ? reaped_status : 1 << 8;
  while (!reaped && ::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  mirror_exit(status);
}

constexpr int kStdDst[2] = {STDOUT_FILENO, STDERR_FILENO};

[[noreturn]] void relay(pid_t child, std::vector<Stream>& streams, int wake_r, std::unique_ptr<HangWatchdog> watch) {
  std::vector<char> buf(kReadSize);
  std::string out;
  bool reaped = false;
  int status = 0;
  double reaped_at = 0;
  double last_tick = now_s();

  auto close_stream = [&](Stream& s) {
    if (s.tag && room_to_tag(s, out, 0)) {
      s.lines.finish(out);
      write_all(s.out, out, s.dead);
    }
    ::close(s.in);
    s.in = -1;
  };
  auto try_reap = [&] {
    if (reaped) return;
    pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) {
      reaped = true;
      reaped_at = now_s();
    }
  };

  try {
    std::vector<pollfd> fds;  // kept across rounds: out of memory, only the tagging can fail (stop_tagging)
    for (;;) {
      fds.clear();
      for (auto& s : streams)
        if (s.in >= 0) fds.push_back({s.in, POLLIN, 0});
      // A program that closed its stdout and stderr may still hang: the watchdog keeps
      // looking (and killing) until the program is gone.
      if (fds.empty() && (reaped || !watch)) break;
      if (reaped && now_s() - reaped_at > kDrainMax) break;
      fds.push_back({wake_r, POLLIN, 0});
      const int timeout = reaped ? kQuietMs : watch ? 1000 : -1;
      int n = ::poll(fds.data(), fds.size(), timeout);
      if (n < 0) {
        if (errno == EINTR) continue;
        break;  // cannot happen with valid fds; fall through to reaping
      }
      if (watch && !reaped && now_s() - last_tick >= 1.0) {
        try {
          watch->tick();
        } catch (...) {
          // Out of memory (the process table): it looks again in a second; the output goes on.
          static bool said = false;
          static constexpr std::string_view kMsg = "gpudiag: hang watchdog: out of memory, looking again each second\n";
          bool gone = false;
          if (!said) write_all(STDERR_FILENO, kMsg, gone);
          said = true;
        }
        last_tick = now_s();
      }
      if (n == 0 && reaped) break;  // the program is gone and the pipes stayed empty
      if (n == 0) continue;
      if (fds.back().revents) {
        char drain[64];
        while (::read(wake_r, drain, sizeof drain) > 0) {
        }
        try_reap();
      }
      for (auto& s : streams) {
        if (s.in < 0) continue;
        // Read what is there now; EAGAIN ends the round. Each read is written out (blocking)
        // before the next, and no larger than fits the stream's budget after tagging.
        for (;;) {
          const std::size_t limit =
              std::clamp<std::size_t>(relay_read_limit(s.lines, s.tag, kRelayStreamBudget), 1, buf.size());
          ssize_t r = ::read(s.in, buf.data(), limit);
          if (r > 0) {
            if (watch) watch->output_seen();
            const std::string_view got(buf.data(), static_cast<std::size_t>(r));
            if (s.tag && room_to_tag(s, out, got.size())) {
              s.lines.feed(got, out);
              write_all(s.out, out, s.dead);
            } else {
              write_all(s.out, got, s.dead);
            }
            if (static_cast<std::size_t>(r) < limit) break;
            continue;
          }
          if (r < 0 && errno == EINTR) continue;
          if (r < 0 && errno == EAGAIN) break;
          close_stream(s);  // EOF or a read error
          break;
        }
      }
    }
    for (auto& s : streams)
      if (s.in >= 0) close_stream(s);
  } catch (...) {
    // Out of memory outside the tagging (the poll list, a watchdog's report): each stream
    // goes on untagged after its notice and held line, as stop_tagging's do, and the rest
    // as it comes, with no allocation.
    int in[2] = {-1, -1}, dst[2] = {STDOUT_FILENO, STDERR_FILENO};
    for (std::size_t i = 0; i < streams.size() && i < 2; ++i) {
      Stream& s = streams[i];
      if (s.in < 0) continue;
      if (s.tag) stop_tagging(s);
      in[i] = s.in;
      dst[i] = s.out;
      s.in = -1;
    }
    watch.reset();  // leaves the node's state dir
    passthrough(child, in[0], in[1], dst, reaped, status);
  }
  while (!reaped) {
    pid_t r = ::waitpid(child, &status, 0);
    if (r == child) reaped = true;
    else if (r < 0 && errno != EINTR) mirror_exit(1 << 8);  // lost the child: exit 1
  }
  if (watch) {
    const bool hang = watch->ended_for_hang();
    watch.reset();  // leaves the node's state dir
    if (hang) ::_exit(kHangExitCode);
  }
  mirror_exit(status);
}

}  // namespace

std::optional<std::string> start_relay(const RelayPlan& plan) {
  if (!plan.out && !plan.err) return std::string("nothing to relay");
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, wake[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], wake[0], wake[1]})
      if (fd >= 0) ::close(fd);
  };
  if ((plan.out && ::pipe2(out_pipe, O_CLOEXEC) != 0) || (plan.err && ::pipe2(err_pipe, O_CLOEXEC) != 0) ||
      ::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::string why = std::strerror(errno);
    close_all();
    return "cannot create pipes: " + why;
  }

  // Signals stay blocked across fork, so neither side sees one before it is ready.
  const std::vector<int> forwarded = forwarded_signals();
  sigset_t block, old;
  sigemptyset(&block);
  for (int s : forwarded) sigaddset(&block, s);
  sigaddset(&block, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &block, &old);
  const pid_t relay_pid = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::string why = std::strerror(errno);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    close_all();
    return "cannot fork: " + why;
  }

  if (pid == 0) {
    // The program: if the relay dies (OOM killer), so does it, at once.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != relay_pid) ::_exit(1);
    if (plan.out) ::dup2(out_pipe[1], STDOUT_FILENO);
    if (plan.err) ::dup2(err_pipe[1], STDERR_FILENO);
    close_all();
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return std::nullopt;
  }

  // The relay. From here on it never returns to Slurm.
  g_child = pid;
  g_stepd = plan.forward_stepd_signals ? 0 : ::getppid();  // 0: no sender is skipped
  g_wake_fd = wake[1];
  struct sigaction sa {};
  sa.sa_sigaction = on_forwarded;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : forwarded) ::sigaction(s, &sa, nullptr);
  struct sigaction sc {};
  sc.sa_handler = on_child;
  sc.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sc.sa_mask);
  ::sigaction(SIGCHLD, &sc, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const int out_r = plan.out ? out_pipe[0] : -1;
  const int err_r = plan.err ? err_pipe[0] : -1;
  for (int w : {out_pipe[1], err_pipe[1]})
    if (w >= 0) ::close(w);
  for (int r : {out_r, err_r})
    if (r >= 0) ::fcntl(r, F_SETFL, O_NONBLOCK);
  // stdin belongs to the program alone.
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    ::close(null_fd);
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::sigprocmask(SIG_UNBLOCK, &block, nullptr);
  // No exception may leave this process: it would land in the plugin's guarded() and
  // make the relay return to Slurm, which would exec the program a second time.
  try {
    std::vector<Stream> streams;
    std::vector<int> keep = {wake[0], wake[1]};
    if (out_r >= 0) {
      streams.emplace_back(out_r, STDOUT_FILENO, plan.tag_out, plan);
      keep.push_back(out_r);
    }
    if (err_r >= 0) {
      streams.emplace_back(err_r, STDERR_FILENO, plan.tag_err, plan);
      keep.push_back(err_r);
    }
    close_inherited(keep);
    std::unique_ptr<HangWatchdog> watch;
    if (plan.hang.duration_s > 0) {
      watch = std::make_unique<HangWatchdog>(plan.hang, pid);
      if (!watch->notice().empty()) {
        std::string msg = watch->notice() + "\n";
        [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg.data(), msg.size());
      }
      if (!watch->active()) {
        std::string msg = "gpudiag: hang watchdog off for task " + std::to_string(plan.hang.rank) + ": " +
                          watch->error() + "\n";
        [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg.data(), msg.size());
        watch.reset();
      }
    }
    relay(pid, streams, wake[0], std::move(watch));
  } catch (...) {
    passthrough(pid, out_r, err_r, kStdDst);
  }
}

}  // namespace gpudiag
