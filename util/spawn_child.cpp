#include "util/spawn_child.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string_view>

extern char** environ;

namespace gpudiag {
namespace {

void close_end(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A pipe whose ends are 3 or above, close-on-exec: dup2 onto 1 and 2 in the child then
// always makes a new descriptor (one that was already 1 would keep its close-on-exec flag).
bool pipe_above_stdio(int ends[2]) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  for (int i = 0; i < 2; ++i) {
    ends[i] = p[i] > 2 ? p[i] : ::fcntl(p[i], F_DUPFD_CLOEXEC, 3);
    if (ends[i] != p[i]) ::close(p[i]);
  }
  if (ends[0] >= 0 && ends[1] >= 0) return true;
  close_end(ends[0]), close_end(ends[1]);
  return false;
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// What went wrong in the child before its exec, sent to the parent on a close-on-exec
// pipe: an exec that works closes the pipe with nothing written.
enum Stage : int { kSetsid = 1, kStdio, kCloseFds, kKeyring, kChdir, kSetgroups, kSetgid, kSetuid, kRootBack, kExec };
const char* stage_name(int s) {
  switch (s) {
    case kSetsid: return "setsid";
    case kStdio: return "stdin, stdout and stderr";
    case kCloseFds: return "closing inherited files";
    case kKeyring: return "a session keyring of its own";
    case kChdir: return "chdir /";
    case kSetgroups: return "setgroups";
    case kSetgid: return "setgid";
    case kSetuid: return "setuid";
    case kRootBack: return "root could be regained";
    default: return "exec";
  }
}

constexpr int kStatusFd = 3;  // where the child keeps the status pipe once it has closed the rest

[[noreturn]] void child_fails(int status, int stage) {
  int msg[2] = {stage, errno};
  (void)!::write(status, msg, sizeof msg);
  ::_exit(127);
}

void close_from(int first) {
  if (::syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  struct rlimit lim {};
  rlim_t top = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? lim.rlim_cur : 1 << 20;
  for (rlim_t fd = static_cast<rlim_t>(first); fd < top && fd < (1u << 20); ++fd) ::close(static_cast<int>(fd));
}

// Between fork and exec: system calls only (the parent may have threads).
[[noreturn]] void become_child(const char* path, char* const* argv, char* const* envp, const ChildUser& as, int out,
                               int err, int status) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
  if (::setsid() < 0) child_fails(status, kSetsid);
  // All pipe ends are 3 or above, so none is overwritten here.
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || ::dup2(null_fd, 0) != 0 || ::dup2(out, 1) != 1 || ::dup2(err, 2) != 2)
    child_fails(status, kStdio);
  if (status != kStatusFd) {
    if (::dup3(status, kStatusFd, O_CLOEXEC) != kStatusFd) child_fails(status, kCloseFds);
    status = kStatusFd;
  }
  close_from(kStatusFd + 1);
  // Root's session keyring is a handle too (keyrings(7)): join a new, empty one. Where
  // keyctl is not there or a seccomp filter refuses it (containers), the child, which
  // inherits that filter, cannot use a keyring either.
  constexpr long kJoinSessionKeyring = 1;  // KEYCTL_JOIN_SESSION_KEYRING
  if (::syscall(SYS_keyctl, kJoinSessionKeyring, nullptr) < 0 && errno != ENOSYS && errno != EPERM)
    child_fails(status, kKeyring);
  if (::chdir("/") != 0) child_fails(status, kChdir);
  if (::setgroups(as.groups.size(), as.groups.data()) != 0) child_fails(status, kSetgroups);
  if (::setgid(as.gid) != 0) child_fails(status, kSetgid);
  if (::setuid(as.uid) != 0) child_fails(status, kSetuid);
  if (as.uid != 0 && ::setuid(0) == 0) {
    errno = EPERM;
    child_fails(status, kRootBack);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  child_fails(status, kExec);
}

SpawnedChild spawn_as(const std::string& path, const std::vector<std::string>& argv, const ChildUser& as, int out[2],
                      int err[2]) {
  SpawnedChild c;
  int status[2] = {-1, -1};
  if (!pipe_above_stdio(status)) {
    c.error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  auto args = c_strings(argv);
  auto envp = c_strings(as.env);
  // No handler of ours may run in the child before its exec: signals wait until the
  // child has set every one to its default.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) become_child(path.c_str(), args.data(), envp.data(), as, out[1], err[1], status[1]);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close_end(status[1]);
  if (pid < 0) {
    close_end(status[0]);
    c.error = std::string("fork: ") + std::strerror(fork_errno);
    return c;
  }
  int msg[2] = {0, 0};
  ssize_t got;
  while ((got = ::read(status[0], msg, sizeof msg)) < 0 && errno == EINTR) {
  }
  close_end(status[0]);
  if (got == static_cast<ssize_t>(sizeof msg)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    c.error = std::string(stage_name(msg[0])) + ": " + std::strerror(msg[1]);
    return c;
  }
  c.pid = pid;
  return c;
}

}  // namespace

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty() || dir[0] != '/') continue;  // never a relative PATH entry
    std::string full = dir + "/" + name;
    struct stat st;
    if (::stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

SpawnedChild spawn_child(const std::vector<std::string>& argv, const ChildUser* as,
                         const std::vector<std::string>& extra_env) {
  SpawnedChild c;
  if (argv.empty() || argv[0].empty()) {
    c.error = "no command";
    return c;
  }
  const std::string path = argv[0].find('/') != std::string::npos ? argv[0] : find_on_path(argv[0]);
  if (path.empty()) {
    c.error = argv[0] + ": " + std::strerror(ENOENT) + " (not on PATH)";
    return c;
  }
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!pipe_above_stdio(out) || !pipe_above_stdio(err)) {
    c.error = std::string("pipe: ") + std::strerror(errno);
    close_end(out[0]), close_end(out[1]), close_end(err[0]), close_end(err[1]);
    return c;
  }
  if (as) {
    c = spawn_as(path, argv, *as, out, err);
  } else {
    // posix_spawn rather than fork: it is cheap in a large process and safe where the
    // caller has threads (a check abandoned at its timeout).
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A new session is also a new process group (the caller's group kill relies on it).
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    auto args = c_strings(argv);
    std::vector<char*> envp;
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      const auto name = entry.substr(0, entry.find('=') + 1);
      bool replaced = false;
      for (const auto& x : extra_env) replaced = replaced || x.compare(0, name.size(), name) == 0;
      if (!replaced) envp.push_back(*e);
    }
    for (const auto& x : extra_env) envp.push_back(const_cast<char*>(x.c_str()));
    envp.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) c.error = argv[0] + ": " + std::strerror(rc);
    else c.pid = pid;
  }
  close_end(out[1]);
  close_end(err[1]);
  if (!c.started()) {
    close_end(out[0]), close_end(err[0]);
    return c;
  }
  c.out = out[0];
  c.err = err[0];
  return c;
}

}  // namespace gpudiag
