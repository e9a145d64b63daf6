#include "spank/watchdog/hang_spread.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "stacks/verdict/step_reports.h"
#include "util/run_command.h"

namespace gpudiag {
namespace {

volatile sig_atomic_t g_spread_requests = 0;

void on_spread(int) { g_spread_requests = 1; }

// In the listener: pass the signal on to the relay, its parent.
void on_spread_in_listener(int) { ::kill(::getppid(), kSpreadSignal); }

}  // namespace

std::vector<std::string> spread_argv(const std::string& step) {
  return {"scancel", "--quiet", "--signal=URG", step};
}

int reported_nodes(const std::vector<std::string>& names) {
  std::set<std::string> hosts;
  for (const auto& n : names)
    if (auto host = hang_report_node(n); !host.empty()) hosts.insert(host);
  return static_cast<int>(hosts.size());
}

bool stop_waiting(int reported, int nodes, double now, double deadline) {
  return reported >= nodes || now >= deadline;
}

void catch_spread_signal() {
  static bool installed = false;
  if (installed) return;
  struct sigaction sa {};
  sa.sa_handler = on_spread;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(kSpreadSignal, &sa, nullptr) == 0) installed = true;
}

bool take_spread_request() {
  if (!g_spread_requests) return false;
  g_spread_requests = 0;
  return true;
}

pid_t start_spread_listener() {
  const pid_t relay = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid < 0 ? 0 : pid;
  // Only async-signal-safe calls from here on: the relay may have threads.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != relay) ::_exit(0);
  ::prctl(PR_SET_NAME, kSpreadListenerName, 0, 0, 0);
  for (int fd = 0; fd < 1024; ++fd) ::close(fd);
  struct sigaction sa {};
  sa.sa_handler = on_spread_in_listener;
  sigemptyset(&sa.sa_mask);
  ::sigaction(kSpreadSignal, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (;;) ::pause();
}

void stop_spread_listener(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

std::string spread_hang(const std::string& step) {
  CommandResult r = run_command(spread_argv(step), kSpreadTimeout, 16 * 1024);
  return r.ok() ? "" : describe_failure("scancel", r, kSpreadTimeout);
}

}  // namespace gpudiag
