#include "util/attached_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iterator>

#include "util/control_bytes.h"

namespace gpudiag {
namespace {

constexpr int kPassedOn[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
volatile std::sig_atomic_t g_signals_seen = 0;
int g_wake_fd = -1;  // the write end of the self-pipe while a child runs

extern "C" void note_signal(int) {
  const int saved = errno;
  g_signals_seen = g_signals_seen + 1;
  if (g_wake_fd >= 0) (void)!::write(g_wake_fd, "s", 1);
  errno = saved;
}

// Our handlers for the signals we pass on, and SIGPIPE ignored (a reader that went away
// is an error on write), for as long as the child runs; the caller's come back after.
class SignalsPassedOn {
 public:
  explicit SignalsPassedOn(int wake_fd) {
    g_signals_seen = 0;
    g_wake_fd = wake_fd;
    struct sigaction sa {};
    sa.sa_handler = note_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocked write returns, and the signal is passed on
    for (std::size_t i = 0; i < std::size(kPassedOn); ++i) ::sigaction(kPassedOn[i], &sa, &old_[i]);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalsPassedOn() {
    for (std::size_t i = 0; i < std::size(kPassedOn); ++i) ::sigaction(kPassedOn[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_wake_fd = -1;
  }
  SignalsPassedOn(const SignalsPassedOn&) = delete;
  SignalsPassedOn& operator=(const SignalsPassedOn&) = delete;

 private:
  struct sigaction old_[std::size(kPassedOn)] {};
  struct sigaction old_pipe_ {};
};

struct Copy {
  int from = -1;  // our read end; -1 once closed
  int to = -1;    // where its bytes go; -1 once that broke
  EscapedStream stream;
};

class Attached {
 public:
  explicit Attached(pid_t pid) : pid_(pid) {}

  // Signals that arrived since the last look, passed on.
  void pass_signals_on() {
    const int seen = g_signals_seen;
    if (seen == passed_) return;
    passed_ = seen;
    if (!exited_) ::kill(pid_, passed_ > 1 ? SIGKILL : SIGTERM);
  }

  // The child's bytes, written in full unless the reader went away (then dropped, and
  // the child told to stop: nobody reads what it says).
  void write_out(Copy& c, const std::string& text) {
    std::size_t done = 0;
    while (c.to >= 0 && done < text.size()) {
      ssize_t n = ::write(c.to, text.data() + done, text.size() - done);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        pass_signals_on();
      } else if (n < 0 && errno == EAGAIN) {
        pollfd p{c.to, POLLOUT, 0};
        ::poll(&p, 1, 100);
        pass_signals_on();
      } else {
        c.to = -1;
        if (!exited_ && !told_to_stop_) ::kill(pid_, SIGTERM);
        told_to_stop_ = true;
      }
    }
  }

  // One read; false at the stream's end.
  bool copy_once(Copy& c, char* buf) {
    ssize_t n = ::read(c.from, buf, kCopyChunk);
    if (n > 0) {
      write_out(c, c.stream.feed(std::string_view(buf, static_cast<std::size_t>(n))));
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    write_out(c, c.stream.finish());
    ::close(c.from);
    c.from = -1;
    return false;
  }

  bool exited() {
    if (exited_) return true;
    siginfo_t info{};
    // WNOWAIT: the zombie keeps its pid ours until it is reaped at the end.
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_)
      exited_ = true;
    return exited_;
  }

 private:
  pid_t pid_;
  int passed_ = 0;
  bool exited_ = false;
  bool told_to_stop_ = false;
};

}  // namespace

std::string EscapedStream::feed(std::string_view bytes) {
  std::string data = std::move(held_);
  held_.clear();
  data.append(bytes);
  // A UTF-8 character cut at the end of a chunk waits for the rest: \xc2 starts every C1
  // control, and the bytes that end any other character are lone 8-bit C1 bytes when seen
  // without their lead.
  std::size_t cut = data.size();
  for (std::size_t back = 1; back <= 3 && back <= data.size(); ++back) {
    const auto b = static_cast<unsigned char>(data[data.size() - back]);
    if ((b & 0xc0) == 0x80) continue;
    const std::size_t len = (b >= 0xc2 && b <= 0xdf) ? 2 : (b >= 0xe0 && b <= 0xef) ? 3 : (b >= 0xf0 && b <= 0xf4) ? 4 : 0;
    if (len > back) cut = data.size() - back;
    break;
  }
  held_ = data.substr(cut);
  data.resize(cut);
  return escape_control(data, true);
}

std::string EscapedStream::finish() {
  std::string rest = std::move(held_);
  held_.clear();
  return escape_control(rest, true);
}

AttachedResult run_attached(const std::vector<std::string>& argv, const ChildUser* as, int to_out, int to_err) {
  AttachedResult r;
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    r.error = "pipe: " + std::string(std::strerror(errno));
    return r;
  }
  {
    SignalsPassedOn passing(wake[1]);
    SpawnedChild child = spawn_child(argv, as);
    if (!child.started()) {
      r.error = child.error;
    } else {
      r.started = true;
      Attached a(child.pid);
      Copy copies[2];
      copies[0].from = child.out, copies[0].to = to_out;
      copies[1].from = child.err, copies[1].to = to_err;
      for (auto& c : copies) ::fcntl(c.from, F_SETFL, O_NONBLOCK);
      std::string buf(kCopyChunk, '\0');
      while (copies[0].from >= 0 || copies[1].from >= 0) {
        a.pass_signals_on();
        if (a.exited()) {
          // What it wrote before it exited is in the pipes: take that (a bounded amount,
          // in case something it started still writes) and stop.
          for (auto& c : copies)
            for (int reads = 0; c.from >= 0 && reads < 16; ++reads) {
              pollfd p{c.from, POLLIN, 0};
              if (::poll(&p, 1, 0) <= 0) break;
              a.copy_once(c, buf.data());
            }
          break;
        }
        pollfd fds[3] = {{copies[0].from, POLLIN, 0}, {copies[1].from, POLLIN, 0}, {wake[0], POLLIN, 0}};
        // Wake up now and then to notice the exit: something the child started may hold
        // its pipes open after it has gone.
        ::poll(fds, 3, 100);
        if (fds[2].revents) {
          char drop[64];
          while (::read(wake[0], drop, sizeof drop) > 0) {
          }
        }
        for (int i = 0; i < 2; ++i)
          if (copies[i].from >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) a.copy_once(copies[i], buf.data());
      }
      for (auto& c : copies)
        if (c.from >= 0) ::close(c.from);
      int status = 0;
      while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) a.pass_signals_on();
      if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
      else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    }
  }
  ::close(wake[0]);
  ::close(wake[1]);
  return r;
}

}  // namespace gpudiag
