#include "spank/hang_watchdog.h"

#include <dirent.h>
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
#include "stacks/stack_report.h"

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

void write_all(int fd, const std::string& text, std::size_t& off) {
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
}

std::string random_suffix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[6] = {};
  if (::getentropy(raw, sizeof raw) != 0) {
    const auto t = static_cast<unsigned long>(wall_now() * 1e6) ^ static_cast<unsigned long>(::getpid());
    for (std::size_t i = 0; i < sizeof raw; ++i) raw[i] = static_cast<unsigned char>(t >> (8 * i));
  }
  std::string s;
  for (unsigned char c : raw) s += kChars[c % (sizeof kChars - 1)];
  return s;
}

// A new regular file, never an existing name: with O_EXCL neither a FIFO (which would
// block the open) nor a link (which would aim the write elsewhere) is ever opened.
int create_private(int dir_fd, const std::string& name) {
  int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

// Writes the report to `dir`/hang.<host>.txt, or when that name is taken to
// hang.<host>.<random>.txt. Returns the path, or "" with `why` set. The dir is opened
// once and the report created relative to that fd: a dir renamed or replaced since the
// task checked it is never written into by name (issue 21 A3).
std::string write_report(const std::string& dir, const std::string& host, const std::string& text, std::string& why) {
  if (dir.empty()) {
    why = "this step has no diag dir (see the message at its start)";
    return "";
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat dst;
  if (dfd < 0 || ::fstat(dfd, &dst) != 0 || dst.st_uid != ::getuid() || (dst.st_mode & (S_IWGRP | S_IWOTH))) {
    why = dfd < 0 ? "cannot open the diag dir " + dir + ": " + std::strerror(errno)
                  : "the diag dir " + dir + " is no longer this user's private directory";
    if (dfd >= 0) ::close(dfd);
    return "";
  }
  std::string name = "hang." + host + ".txt";
  int fd = create_private(dfd, name);
  for (int i = 0; fd < 0 && errno == EEXIST && i < 16; ++i) {
    name = "hang." + host + "." + random_suffix() + ".txt";
    fd = create_private(dfd, name);
  }
  const int open_err = errno;
  ::close(dfd);
  std::string path = dir + "/" + name;
  if (fd < 0) {
    why = "cannot create " + path + ": " + std::strerror(open_err);
    return "";
  }
  std::size_t off = 0;
  write_all(fd, text, off);
  const int err = errno;
  ::close(fd);
  if (off != text.size()) {
    why = "cannot write " + path + ": " + std::strerror(err);
    return "";
  }
  return path;
}

bool private_dir_of(const struct stat& st, uid_t uid) {
  return S_ISDIR(st.st_mode) && st.st_uid == uid && (st.st_mode & 077) == 0;
}

DirFact dir_fact(const std::string& path, uid_t uid, uid_t& owner) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? DirFact::missing : DirFact::taken;
  owner = st.st_uid;
  return private_dir_of(st, uid) ? DirFact::ours : DirFact::taken;
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

std::string hang_state_dir(unsigned uid, const std::string& step) {
  struct stat st;
  std::string base = "/dev/shm";
  if (::stat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp && tmp[0] == '/' ? tmp : "/tmp";
  }
  return base + "/gpudiag-" + std::to_string(uid) + "-" + step;
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
      if (::mkdir(names[static_cast<std::size_t>(pick.create)].c_str(), 0700) == 0) created = true;
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
  my_file_ = w_.state_dir + "/task." + std::to_string(w_.rank);
  fd_ = ::open(my_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    error_ = "cannot create " + my_file_ + ": " + std::strerror(errno);
    return;
  }
  std::string pid = std::to_string(child_) + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd_, pid.data(), pid.size());
  last_touch_ = wall_now();
}

HangWatchdog::~HangWatchdog() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(my_file_.c_str());
  // The last task of the node out removes the directory.
  if (node_tasks().empty()) {
    ::unlink((w_.state_dir + "/" + kMarker).c_str());
    ::rmdir(w_.state_dir.c_str());
  }
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
    int fd = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    [[maybe_unused]] ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
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
  int fd = ::open((w_.state_dir + "/" + kMarker).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  [[maybe_unused]] ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
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
  if (marker || !node_silent(now, last, w_.duration_s)) return;
  // One relay per node acts: whoever creates the marker.
  int m = ::open((w_.state_dir + "/" + kMarker).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (m < 0) return;
  const char* what = w_.kill ? "kill\n" : "report\n";
  [[maybe_unused]] ssize_t n = ::write(m, what, std::strlen(what));
  ::close(m);
  declare_hang();
}

void HangWatchdog::declare_hang() {
  auto tasks = node_tasks();
  // torch's flight recorder first: a write to its pipe makes it dump to the diag dir.
  bool asked = false;
  for (auto& [rank, pid] : tasks) {
    if (w_.diag_dir.empty()) break;  // no diag dir: torch has no pipe to ask
    // torch made it as this user; anything else at that name is not asked.
    std::string pipe = w_.diag_dir + "/fr_pipe.rank" + std::to_string(rank) + ".pipe";
    int fd = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_uid == ::getuid())
      asked |= ::write(fd, "1\n", 2) == 2;
    ::close(fd);
  }
  if (asked) {
    timespec ts{static_cast<time_t>(kDumpWait), 0};
    ::nanosleep(&ts, nullptr);
  }

  std::vector<TaskRoot> roots;
  for (auto& [rank, pid] : tasks) roots.push_back({rank, pid});
  char when[64] = {};
  std::time_t t = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
  std::string header = "gpudiag hang report: step " + w_.step + " on " + w_.host + ", no output from any task for " +
                       format_duration(w_.duration_s) + (w_.cpu ? " and no CPU progress" : "") + ", at " + when +
                       "\naction: " + (w_.kill ? "kill (SIGTERM, then SIGKILL after " + format_duration(w_.kill_grace_s) + ")"
                                               : std::string("report (the step runs on)")) +
                       (asked ? "\ntorch flight-recorder dump requested: " + w_.diag_dir + "/fr_trace.rank*" : "");
  std::string report = stack_report(header, roots, find_stack_tools(), w_.report_timeout_s, w_.report_timeout_s);
  std::string why;
  std::string where = write_report(w_.diag_dir, w_.host, report, why);
  if (where.empty()) {
    // Nothing is lost: the report goes where the task's errors go.
    say("gpudiag: " + why + "; the hang report follows on stderr");
    say(report);
    where = "stderr";
  }
  say("gpudiag: no output for " + format_duration(w_.duration_s) + " on " + w_.host + "; stacks in " + where + "; " +
      (w_.kill ? "ending step (exit code " + std::to_string(kHangExitCode) + ")" : std::string("step runs on")));
  if (w_.kill) {
    signal_trees(SIGTERM);
    kill_at_ = wall_now() + w_.kill_grace_s;  // tick() follows with SIGKILL
  }
}

}  // namespace gpudiag
