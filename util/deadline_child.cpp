#include "util/deadline_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace gpudiag {
namespace {

// Every fd but 0-2 and `keep`: the child must not hold the caller's pipes open.
void close_all_but(int keep) {
#ifdef SYS_close_range
  if (keep > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
  if (::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0) return;
#endif
  const long max = ::sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); ++fd)
    if (fd != keep) ::close(fd);
}

}  // namespace

bool write_whole(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

ChildAnswer run_in_child_until(double timeout_s, std::size_t max_bytes, const std::function<void(int out)>& work) {
  ChildAnswer a;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    a.error = std::string("cannot make a pipe: ") + std::strerror(errno);
    return a;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    a.error = std::string("cannot fork: ") + std::strerror(errno);
    ::close(p[0]);
    ::close(p[1]);
    return a;
  }
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    close_all_but(p[1]);
    work(p[1]);
    ::_exit(0);
  }
  ::close(p[1]);
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  char buf[65536];
  bool eof = false;
  while (!eof) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) break;
    struct pollfd pfd = {p[0], POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(left > 1000 ? 1000 : left));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    const std::size_t room = max_bytes > a.bytes.size() ? max_bytes - a.bytes.size() : 0;
    a.bytes.append(buf, static_cast<std::size_t>(n) < room ? static_cast<std::size_t>(n) : room);
  }
  ::close(p[0]);
  if (!eof) {
    // What it has not done yet it must not do after we told the caller it gave up.
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, WNOHANG);
    a.error = "no answer within " + std::to_string(static_cast<int>(timeout_s + 0.5)) + " s";
    return a;
  }
  // EOF: the child has exited or is about to (its last step is _exit).
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  a.finished = true;
  return a;
}

}  // namespace gpudiag
