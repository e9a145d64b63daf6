#include "spank/watchdog/hang_watchdog.h"

#include <dirent.h>
#include <sys/types.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "nodeinfo/proc_tree.h"
#include "spank/watchdog/hang_diag_dir.h"
#include "spank/watchdog/hang_spread.h"
#include "stacks/stack_report.h"
#include "util/private_file.h"

namespace gpudiag {
namespace {

constexpr const char* kMarker = "hang";
constexpr double kDumpWait = 3.0;  // seconds torch gets to write its flight-recorder dump
constexpr int kSpareNames = 8;     // state dir names to try after a squatted one

double wall_now() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string format_duration(double s) {
  long v = std::lround(s);
  if (v % 3600 == 0 && v >= 3600) return std::to_string(v / 3600) + "h";
  if (v % 60 == 0 && v >= 60) return std::to_string(v / 60) + "m";
  return std::to_string(v) + "s";
}

void sleep_s(double s) {
  if (s <= 0) return;
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - std::floor(s)) * 1e9)};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

DirFact dir_fact(const std::string& path, uid_t uid, uid_t& owner) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? DirFact::missing : DirFact::taken;
  owner = st.st_uid;
  return judge_private_dir(st.st_mode, st.st_uid, uid, DirPrivacy::no_other_access) == DirVerdict::ok ? DirFact::ours
                                                                                                      : DirFact::taken;
}

void say(const std::string& line) {
  std::string l = line + "\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, l.data(), l.size());
}

}  // namespace

bool node_silent(double now, const std::vector<double>& last_progress, double duration) {
  if (last_progress.empty() || duration <= 0) return false;
  return std::all_of(last_progress.begin(), last_progress.end(), [&](double t) { return now - t >= duration; });
}

DirPick pick_state_dir(const std::vector<DirFact>& candidates) {
  DirPick p;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] == DirFact::ours) {
      p.use = static_cast<int>(i);
      return p;
    }
    if (candidates[i] == DirFact::missing && p.create < 0) p.create = static_cast<int>(i);
  }
  return p;
}

HangWatchdog::HangWatchdog(HangWatch w, pid_t child) : w_(std::move(w)), child_(child) {
  if (w_.duration_s <= 0) return;
  // The node's tasks meet in the first name of a fixed list that is this user's
  // private directory (see the header).
  std::vector<std::string> names = {w_.state_dir};
  for (int i = 1; i <= kSpareNames; ++i) names.push_back(w_.state_dir + "." + std::to_string(i));
  const uid_t uid = ::getuid();
  bool created = false;
  DirPick pick;
  uid_t squatter = 0;
  for (int round = 0; round < 3 && pick.use < 0; ++round) {
    std::vector<DirFact> facts;
    for (const auto& n : names) facts.push_back(dir_fact(n, uid, squatter));
    pick = pick_state_dir(facts);
    if (pick.use < 0 && pick.create >= 0) {
      if (::mkdir(names[static_cast<std::size_t>(pick.create)].c_str(), kPrivateDirMode) == 0) created = true;
      else if (errno != EEXIST) {
        error_ = "cannot create " + names[static_cast<std::size_t>(pick.create)] + ": " + std::strerror(errno);
        return;
      }
    }
  }
  if (pick.use < 0) {
    // Never off (issue 21 A2): this task watches itself alone, in a dir no one can
    // predict; the node's other tasks do the same.
    std::string own = w_.state_dir + ".XXXXXX";
    if (!::mkdtemp(own.data())) {
      error_ = w_.state_dir + " and the " + std::to_string(kSpareNames) + " names after it are taken by another user (uid " +
               std::to_string(squatter) + ") and " + own + " cannot be made: " + std::strerror(errno);
      return;
    }
    notice_ = "gpudiag: " + w_.state_dir + " and the " + std::to_string(kSpareNames) +
              " names after it are taken by another user (uid " + std::to_string(squatter) +
              "); the hang watchdog stays on, but task " + std::to_string(w_.rank) +
              " watches only its own output (in " + own + "): ask the admin to remove them";
    names.push_back(own);
    pick.use = static_cast<int>(names.size()) - 1;
  } else if (pick.use > 0 && created) {
    struct stat st;
    std::string who = ::lstat(w_.state_dir.c_str(), &st) == 0 ? "uid " + std::to_string(st.st_uid) : "someone";
    notice_ = "gpudiag: " + w_.state_dir + " is taken by " + who + " (not this user's private directory); " +
              "the hang watchdog uses " + names[static_cast<std::size_t>(pick.use)] + " instead";
  }
  w_.state_dir = names[static_cast<std::size_t>(pick.use)];
  // From here on the dir is used through this fd (util/private_file.h), checked again:
  // a name swapped since the walk above is not followed.
  dir_fd_ = open_dir_fd(w_.state_dir.c_str());
  if (dir_fd_ < 0 || !is_private_dir_fd(dir_fd_, uid, DirPrivacy::no_other_access)) {
    error_ = "cannot use " + w_.state_dir + ": " +
             (dir_fd_ < 0 ? std::string(std::strerror(errno)) : "no longer this user's private directory");
    return;
  }
  my_name_ = "task." + std::to_string(w_.rank);
  my_file_ = w_.state_dir + "/" + my_name_;
  fd_ = open_own_file(dir_fd_, my_name_.c_str(), true);
  if (fd_ < 0) {
    error_ = "cannot create " + my_file_ + ": " + std::strerror(errno);
    return;
  }
  std::string pid = std::to_string(child_) + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd_, pid.data(), pid.size());
  last_touch_ = wall_now();
  catch_spread_signal();
  if (w_.nodes > 1) listener_ = start_spread_listener();
}

HangWatchdog::~HangWatchdog() {
  stop_spread_listener(listener_);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlinkat(dir_fd_, my_name_.c_str(), 0);
    // The last task of the node out removes the directory.
    if (node_tasks().empty()) {
      ::unlinkat(dir_fd_, kMarker, 0);
      ::rmdir(w_.state_dir.c_str());
    }
  }
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

void HangWatchdog::output_seen() {
  if (fd_ < 0) return;
  double now = wall_now();
  if (now - last_touch_ < 1.0) return;
  ::futimens(fd_, nullptr);
  last_touch_ = now;
}

std::vector<std::pair<int, pid_t>> HangWatchdog::node_tasks() const {
  std::vector<std::pair<int, pid_t>> out;
  DIR* d = ::opendir(w_.state_dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "task.", 5) != 0) continue;
    int rank = std::atoi(e->d_name + 5);
    char buf[32] = {};
    const OpenedFile f = open_regular_file(::dirfd(d), e->d_name);
    if (f.fd < 0) continue;
    read_up_to(f.fd, buf, sizeof buf - 1);
    ::close(f.fd);
    pid_t pid = static_cast<pid_t>(std::atol(buf));
    if (pid > 0) out.emplace_back(rank, pid);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool HangWatchdog::ended_for_hang() const {
  if (w_.duration_s <= 0 || !w_.kill) return false;
  char buf[8] = {};
  const OpenedFile f = open_regular_file(dir_fd_, kMarker);
  if (f.fd < 0) return false;
  read_up_to(f.fd, buf, sizeof buf - 1);
  ::close(f.fd);
  return std::strncmp(buf, "kill", 4) == 0;
}

void HangWatchdog::signal_trees(int sig) {
  ProcTable table = snapshot_processes();
  for (auto& [rank, pid] : node_tasks())
    for (pid_t p : process_tree(table, pid)) ::kill(p, sig);
}

void HangWatchdog::tick() {
  if (fd_ < 0) return;
  const double now = wall_now();
  // Whichever relay declared the hang, each one makes sure its own task ends: SIGKILL
  // once the grace period after the SIGTERM is over.
  if (ended_for_hang()) {
    if (kill_at_ == 0) kill_at_ = now + w_.kill_grace_s;
    if (now >= kill_at_) {
      ProcTable table = snapshot_processes();
      for (pid_t p : process_tree(table, child_)) ::kill(p, SIGKILL);
    }
    return;
  }
  if (w_.cpu) {
    // A silent task that computes is not hung.
    ProcTable table = snapshot_processes();
    double cpu = tree_cpu_seconds(table, process_tree(table, child_));
    if (last_cpu_ >= 0 && cpu - last_cpu_ >= kBusyCpuShare * (now - last_cpu_at_)) {
      ::futimens(fd_, nullptr);
      last_touch_ = now;
    }
    last_cpu_ = cpu;
    last_cpu_at_ = now;
  }
  // Look at everyone's progress.
  std::vector<double> last;
  DIR* d = ::opendir(w_.state_dir.c_str());
  if (!d) return;
  bool marker = false;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, kMarker) == 0) marker = true;
    if (std::strncmp(e->d_name, "task.", 5) != 0) continue;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      last.push_back(static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9);
  }
  ::closedir(d);
  // Another node declared the hang (hang_spread.h): this node dumps whether or not it is silent.
  const bool asked = take_spread_request();
  if (marker || (!asked && !node_silent(now, last, w_.duration_s))) return;
  // One relay per node acts: whoever creates the marker. "dump" until the SIGTERM is
  // out, so the node's other relays do not start their SIGKILL countdown while the
  // step's nodes are still looking at their tasks.
  int m = create_new_file(dir_fd_, kMarker);
  if (m < 0) return;
  const char* what = w_.kill ? "dump\n" : "report\n";
  [[maybe_unused]] ssize_t n = ::write(m, what, std::strlen(what));
  ::close(m);
  declare_hang(asked);
}

void HangWatchdog::wait_for_other_nodes(double start, bool torch_asked, HangDiagDir& diag) const {
  if (w_.nodes <= 1) return;
  // The last node to start its report starts kSpreadLatency after this one at most,
  // and its report has the same deadline as ours. A diag dir that does not answer shows
  // no report: the wait then runs to the deadline, as when a node's report never comes.
  const double deadline = start + kSpreadLatency + w_.report_timeout_s + (torch_asked ? kDumpWait : 0);
  std::vector<std::string> names;
  for (;;) {
    if (diag.answering()) diag.names(names);
    if (stop_waiting(reported_nodes(names), w_.nodes, wall_now(), deadline)) return;
    sleep_s(0.25);
  }
}

void HangWatchdog::declare_hang(bool asked) {
  const double start = wall_now();
  // Every step in the diag dir has a deadline, and all of them together wait one
  // deadline at most: a diag dir on a hung mount never holds back the kill for long.
  HangDiagDir diag(w_.diag_dir, w_.diag_dir_timeout_s);
  // The step's other nodes dump too, before anything is killed (hang_spread.h).
  bool spread = asked;
  std::string spread_failed;
  if (!asked && w_.nodes > 1 && diag.claim_declared(w_.host)) {
    spread_failed = spread_hang(w_.step);
    spread = spread_failed.empty();
  } else if (!asked && w_.nodes > 1) {
    spread = true;  // another node signalled the step already
  }
  auto tasks = node_tasks();
  // torch's flight recorder first: a write to its pipe makes it dump to the diag dir.
  std::vector<int> ranks;
  for (auto& [rank, pid] : tasks) ranks.push_back(rank);
  const bool asked_torch = diag.ask_torch(ranks);
  if (asked_torch) sleep_s(kDumpWait);

  std::vector<TaskRoot> roots;
  for (auto& [rank, pid] : tasks) roots.push_back({rank, pid});
  char when[64] = {};
  std::time_t t = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
  std::string by = asked ? diag.declared_by() : "";
  std::string why_now = asked ? "asked by " + (by.empty() ? std::string("SIGURG (another node's hang watchdog, or scancel --signal=URG)")
                                                          : "the hang watchdog on " + by + " (another node of the step)")
                              : "no output from any task for " + format_duration(w_.duration_s) +
                                    (w_.cpu ? " and no CPU progress" : "");
  std::string header = "gpudiag hang report: step " + w_.step + " on " + w_.host + ", " + why_now + ", at " + when +
                       "\naction: " + (w_.kill ? "kill (SIGTERM, then SIGKILL after " + format_duration(w_.kill_grace_s) + ")"
                                               : std::string("report (the step runs on)")) +
                       (asked_torch ? "\ntorch flight-recorder dump requested: " + w_.diag_dir + "/fr_trace.rank*" : "");
  std::string report = stack_report(header, roots, find_stack_tools(), w_.report_timeout_s, w_.report_timeout_s);
  std::string why;
  std::string where = diag.write_report(w_.host, report, why);
  if (where.empty()) {
    // Nothing is lost: the report goes where the task's errors go.
    say("gpudiag: " + why + "; the hang report follows on stderr");
    say(report);
    where = "stderr";
  }
  const std::string ending =
      w_.kill ? "ending step (exit code " + std::to_string(kHangExitCode) + ")" : std::string("step runs on");
  if (asked)
    say("gpudiag: hang declared " + (by.empty() ? std::string("by another node") : "on " + by) + "; stacks of " + w_.host +
        " in " + where + "; " + ending);
  else
    say("gpudiag: no output for " + format_duration(w_.duration_s) + " on " + w_.host + "; stacks in " + where + "; " +
        ending);
  if (!spread_failed.empty())
    say("gpudiag: cannot ask the step's other nodes for their stacks: " + spread_failed + "; only " + w_.host +
        " wrote a hang report (with hang-action=report, gpudiag stacks " + w_.step + " collects every node's)");
  if (w_.kill) {
    if (spread) wait_for_other_nodes(start, asked_torch, diag);
    // Now the node's other relays count down to their SIGKILL.
    int m = open_own_file(dir_fd_, kMarker, false);
    if (m >= 0) {
      [[maybe_unused]] ssize_t n = ::write(m, "kill\n", 5);
      ::close(m);
    }
    signal_trees(SIGTERM);
    kill_at_ = wall_now() + w_.kill_grace_s;  // tick() follows with SIGKILL
  }
}

}  // namespace gpudiag
