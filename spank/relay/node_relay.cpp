#include "spank/relay/node_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <time.h>

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "spank/relay/line_prefixer.h"
#include "spank/relay/node_relay_wire.h"
#include "spank/relay/write_pacing.h"
#include "util/detached_thread.h"

namespace gpudiag {
namespace {

constexpr std::size_t kReadSize = 64 * 1024;
// The most one stream reads in one round of the loop (Loop::pump): what one read took
// before the budgets (issue 30.3).
constexpr std::size_t kRoundRead = 64 * 1024;
// A task hands over at most two streams; more than this many is not a Slurm step
// (slurmstepd's own limit on tasks per node is far lower), and each costs two fds.
constexpr std::size_t kMaxStreams = 2 * 4096;
// At stop, the most one stream may still read: what a dying program left in a pipe of
// the largest size a user can set (pipe-max-size), so a writer that keeps on cannot
// hold the stop.
constexpr std::size_t kFinalReadMax = 1 << 20;
constexpr std::size_t kNoDrain = std::numeric_limits<std::size_t>::max();
constexpr std::size_t kThreadStack = 256 * 1024;
// After a task's program exits, a child of it that kept the pipe open must not hold the
// step's output open (slurmstepd waits for it before the step can end): stop once the
// pipe stays empty this long, or at the latest after kDrainMax. The per-task relay's rule.
constexpr double kQuiet = 0.2;
constexpr double kDrainMax = 5.0;
constexpr std::int32_t kStopWord = -1;

double now_s() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct Stream {
  int in = -1;   // our pipe's read end
  int out = -1;  // Slurm's stdout or stderr for this task
  bool tag = true;
  LinePrefixer lines;
  std::string pending;  // tagged bytes not yet written
  std::size_t off = 0;
  bool dead = false;    // srun's side is gone: read on, drop the bytes
  bool raw = false;     // the tagging failed (out of memory): bytes pass as they are
  std::uint32_t task = 0;  // the task's local id
  double exited_at = 0;    // when slurmstepd reaped the task; 0: still running
  double last_data = 0;
  // Once the drain limit came: how many of the bytes the pipe held then are still to be
  // read (at srun's pace); the input ends after them. kNoDrain: relayed to EOF.
  std::size_t drain_left = kNoDrain;
  std::size_t counted = 0;  // pending's capacity, as the step's total counts it
  bool no_wait = false;        // at stop: out of memory, what srun does not take now is dropped
  const std::atomic<bool>* stop_requested = nullptr;  // the relay's: a wait ends when it is set
  bool owes_held = false;      // gone untagged: the partial line the tagging held is still to go
  bool full = false;           // the last write found Slurm's pipe full
  std::size_t pipe_size = 0;   // Slurm's pipe's capacity; 0: not a pipe (no pacing)
  WritePacing pacing;
  double write_at = 0;         // a full pipe is polled again from then on
  // Which stream has a chunk half written to this stream's destination (the open file that
  // Slurm's fd leads to; shared by a task's stdout and stderr under `-o FILE`, by every task
  // under one `-o` without %t): no other stream writes there until that chunk is out, or its
  // lines would be spliced into the middle of one. nullptr: nothing half written.
  Stream** holder = nullptr;
  Stream(int in_fd, int out_fd, bool tag_lines, const std::string& tag_text, std::size_t max_line)
      : in(in_fd), out(out_fd), tag(tag_lines), lines(tag_text, max_line) {}
  ~Stream() {
    release();
    for (int fd : {in, out})
      if (fd >= 0) ::close(fd);
  }
  bool has_pending() const { return off < pending.size(); }
  // Another stream's chunk is half written to this one's destination.
  bool waits_for_another() const { return holder && *holder && *holder != this; }
  void release() {
    if (holder && *holder == this) *holder = nullptr;
  }
  bool done() const { return in < 0 && (dead || !has_pending()); }
};

// The holder of a destination that a dropped stream left inside a line (final_drain):
// never a stream, only compared, never dereferenced.
Stream* const kCutLine = reinterpret_cast<Stream*>(alignof(Stream));

void set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

bool is_pipe(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}
bool is_pipe_or_socket(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

// Writes what srun takes now; the rest waits for POLLOUT. A short write means Slurm's
// pipe is full: trying again would only cost a write that fails with EAGAIN (one per
// wake-up while srun is the slower side, about a quarter of the thread's system calls).
void flush(Stream& s) {
  if (s.waits_for_another()) return;  // the loop writes it once the other chunk is out
  while (!s.dead && s.has_pending()) {
    const std::size_t want = s.pending.size() - s.off;
    const ssize_t n = ::write(s.out, s.pending.data() + s.off, want);
    if (n > 0) {
      s.off += static_cast<std::size_t>(n);
      if (static_cast<std::size_t>(n) < want) {
        s.full = true;
        if (s.holder) *s.holder = &s;  // half written: the destination is this stream's until the rest is out
        return;
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      s.full = true;
      return;
    } else {
      s.dead = true;  // srun went away (EPIPE: the thread blocks SIGPIPE)
    }
  }
  s.full = false;
  s.release();
  // Out (or dropped): the memory goes back, so the step's budget counts only what waits.
  std::string().swap(s.pending);
  s.off = 0;
}

// Waits until `fd` (non-blocking) takes more. The whole thread waits here, so not for
// long: false when srun took nothing for kDrainMax, or at once when the relay is asked to
// stop (slurmstepd waits for the thread then), looked at every 50 ms.
bool wait_writable(int fd, const std::atomic<bool>* stop_requested) {
  pollfd p{fd, POLLOUT, 0};
  for (int waited_ms = 0; waited_ms < static_cast<int>(kDrainMax * 1000);) {
    if (stop_requested && stop_requested->load()) return false;
    const int r = ::poll(&p, 1, 50);
    if (r > 0) return true;
    if (r == 0) waited_ms += 50;
    else if (errno != EINTR) return false;
  }
  return false;
}

// Writes all of `data` to `s`'s destination now, waiting for room (wait_writable) unless
// the thread is stopping (no_wait). false: it could not.
bool write_now(Stream& s, std::string_view data) {
  for (std::size_t off = 0; off < data.size();) {
    const ssize_t w = ::write(s.out, data.data() + off, data.size() - off);
    if (w > 0) off += static_cast<std::size_t>(w);
    else if (w < 0 && errno == EAGAIN) {
      if (s.no_wait || !wait_writable(s.out, s.stop_requested)) return false;
    } else if (!(w < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

// Before bytes go straight to `s`'s destination: the rest of another stream's chunk half
// written there goes first, or they would land inside its line. false: it never got out
// (wait_writable), or the destination ends inside a line for good (kCutLine).
bool finish_others_chunk(Stream& s) {
  while (s.waits_for_another()) {
    Stream* const other = *s.holder;
    if (other == kCutLine) return false;
    flush(*other);  // releases the destination once the chunk is out, or its srun is gone
    if (s.waits_for_another() && (s.no_wait || !wait_writable(other->out, s.stop_requested))) return false;
  }
  return true;
}

// Out of memory in slurmstepd while relaying `s`: it goes on untagged. What it still owes
// goes first, after the rest of another stream's chunk half written to the same file: its
// own pending bytes (whole lines), then, for a tagged stream, the notice; the partial line
// the tagging held is owed (owes_held) and goes with the next bytes (pass_raw), so that
// streams sharing a file give all their notices before any partial line. The thread waits
// here (wait_writable) unless it is stopping; a stream that cannot write is lost, so that
// the thread can still stop.
void begin_raw(Stream& s) {
  if (s.dead || s.raw) return;
  s.raw = true;
  bool ok = finish_others_chunk(s);
  while (ok && !s.dead && s.has_pending()) {
    flush(s);
    if (!s.dead && s.has_pending()) ok = !s.no_wait && wait_writable(s.out, s.stop_requested);
  }
  if (ok && !s.dead && s.tag) ok = write_now(s, kUntaggedNotice);
  s.owes_held = ok && s.tag && s.lines.held() > 0;
  if (!ok) s.dead = true;
}

// `data` of a stream gone untagged (begin_raw), after the partial line it owes.
void pass_raw(Stream& s, std::string_view data) {
  begin_raw(s);
  if (s.dead) return;
  bool ok = !s.owes_held || write_now(s, s.lines.held_bytes());
  s.owes_held = false;
  ok = ok && write_now(s, data);
  if (!ok) s.dead = true;
}

// Bytes that arrived on a stream: tagged into `pending`, or as they are. Read only while
// nothing is pending and at most relay_read_limit, so `pending` stays within its budget.
void take(Stream& s, const char* data, std::size_t n) {
  if (s.dead) return;
  try {
    if (s.tag && !s.raw) {
      s.pending.reserve(s.pending.size() + s.lines.max_output(n));  // feed allocates nothing more
      s.lines.feed(std::string_view(data, n), s.pending);
    } else {
      s.pending.append(data, n);
    }
  } catch (...) {
    pass_raw(s, std::string_view(data, n));
  }
}

void end_of_input(Stream& s) {
  ::close(s.in);
  s.in = -1;
  if (s.tag && !s.raw && !s.dead) {
    try {
      s.pending.reserve(s.pending.size() + s.lines.max_output(0));  // finish allocates nothing more
      s.lines.finish(s.pending);
    } catch (...) {
      pass_raw(s, {});  // the partial line goes out as it is
    }
  }
}

// What one read did: `ended` when the stream's input ended; `emptied` when it took less
// than it asked for (or nothing): the pipe holds no more now.
struct ReadResult {
  bool ended = false;
  bool emptied = true;
};

// One read of at most `limit` bytes into `buf` (kReadSize bytes).
ReadResult read_once(Stream& s, char* buf, std::size_t limit) {
  if (s.drain_left == 0) {
    end_of_input(s);
    return {true, true};
  }
  limit = std::min({limit, kReadSize, s.drain_left});
  if (limit == 0) return {false, false};  // no room now: the bytes wait in the pipe
  for (;;) {
    const ssize_t r = ::read(s.in, buf, limit);
    if (r > 0) {
      s.last_data = now_s();
      take(s, buf, static_cast<std::size_t>(r));
      if (s.drain_left != kNoDrain && (s.drain_left -= static_cast<std::size_t>(r)) == 0) {
        end_of_input(s);  // what the pipe held at the drain limit is read
        return {true, true};
      }
      return {false, static_cast<std::size_t>(r) < limit};
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return {false, true};
    end_of_input(s);  // EOF, or a read error
    return {true, true};
  }
}

// One message from the relay's socket: its bytes into `data`, the fds it carried
// (close-on-exec; at most kMaxHandoffFds, as the control buffer holds no more). `n` is
// recvmsg's result, with errno as it left it.
struct Message {
  ssize_t n = 0;
  int flags = 0;
  int fds[kMaxHandoffFds];
  std::size_t nfds = 0;
};

Message receive_message(int sock, char* data, std::size_t size) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandoffFds)];
  iovec iov{data, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  Message m;
  m.n = ::recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (m.n <= 0) return m;
  m.flags = msg.msg_flags;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t k = 0; k < count && m.nfds < kMaxHandoffFds; ++k)
      std::memcpy(&m.fds[m.nfds++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
  }
  return m;
}

// Shuts the socket down (every forked copy of it with it) and closes the fds of the
// handoffs still queued on it.
void refuse_handoffs(int sock) {
  ::shutdown(sock, SHUT_RDWR);
  for (;;) {
    char data[kMaxHandoffBytes + 1];
    const Message m = receive_message(sock, data, sizeof data);
    if (m.n < 0 && errno == EINTR) continue;
    if (m.n <= 0) return;
    for (std::size_t k = 0; k < m.nfds; ++k) ::close(m.fds[k]);
  }
}

class Loop {
 public:
  Loop(int sock, int stop_fd, const std::atomic<bool>& stop_requested, int local_tasks,
       std::atomic<std::size_t>& peak_held)
      : sock_(sock),
        stop_fd_(stop_fd),
        stop_requested_(stop_requested),
        peak_held_(peak_held),
        local_tasks_(local_tasks > 0 ? static_cast<std::size_t>(local_tasks) : 0),
        buf_(new char[kReadSize]) {
    // These lists never grow: out of memory, a handoff fails, not the loop.
    fds_.reserve(kMaxStreams + 2);
    owner_.reserve(kMaxStreams);
    streams_.reserve(kMaxStreams);
  }

  // Out of memory outside the tagging (a handoff's stream, the set of ended tasks), the
  // loop ends: the streams it holds go on untagged, with no allocation, rather than close
  // (their programs would die of EPIPE) (adversary review 11).
  void run() {
    try {
      relay();
    } catch (...) {
      pass_all_raw();
    }
  }

 private:
  void relay() {
    std::vector<pollfd>& fds = fds_;
    std::vector<Stream*>& owner = owner_;  // the stream of each pollfd past the first two
    bool& stopping = stopping_;
    while (!stopping) {
      fds.clear();
      owner.clear();
      fds.push_back({stop_fd_, POLLIN, 0});
      fds.push_back({sock_open_ ? sock_ : -1, POLLIN, 0});
      const double now = now_s();
      for (auto& s : streams_) {
        if (s->has_pending() && !s->dead) {
          if (s->write_at > now) continue;  // its full pipe waits (WritePacing); wake_at
          if (s->waits_for_another()) continue;  // polled again once the other chunk is out
          fds.push_back({s->out, POLLOUT, 0});
          owner.push_back(s.get());
        } else if (s->in >= 0 && read_limit(*s) > 0) {
          // A stream with no room waits, its bytes in its pipe, until a flush frees some.
          fds.push_back({s->in, POLLIN, 0});
          owner.push_back(s.get());
        }
      }
      const double at = wake_at(now);
      timespec timeout{};
      if (at >= 0) {
        const double left = std::max(0.0, at - now);
        timeout.tv_sec = static_cast<time_t>(left);
        timeout.tv_nsec = static_cast<long>((left - static_cast<double>(timeout.tv_sec)) * 1e9);
      }
      if (::ppoll(fds.data(), fds.size(), at >= 0 ? &timeout : nullptr, nullptr) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[0].revents) stopping = read_control() || stop_requested_.load();
      if (fds[1].revents) receive();
      // The room freed by one round's flushes goes to the streams in turn, not always to
      // the first ones.
      const std::size_t ready = owner.size();
      turn_ = ready ? (turn_ + 1) % ready : 0;
      for (std::size_t k = 0; k < ready; ++k) {
        const std::size_t i = 2 + (turn_ + k) % ready;
        if (!fds[i].revents) continue;
        Stream& s = *owner[i - 2];
        if (fds[i].events == POLLOUT) write_again(s);
        pump(s);
      }
      end_drained_inputs();
      reap();
    }
    final_drain();
  }

  // pass_raw for every stream, then their bytes as they come, until the stop: a read and
  // a write each, nothing allocated. At the stop what srun takes now goes out (no_wait).
  void pass_all_raw() {
    refuse_handoffs(sock_);  // a task that hands over now relays itself
    // The stop word may be gone already: read_control took it with a task's word whose
    // ended_.insert threw. stop() sets the flag before it writes the word (adversary 12).
    stopping_ = stopping_ || stop_requested_.load();
    for (auto& s : streams_)
      if (s) {
        s->no_wait = stopping_;
        begin_raw(*s);  // every notice before any partial line
      }
    for (auto& s : streams_)
      if (s) pass_raw(*s, {});
    while (!stopping_) {
      fds_.clear();
      owner_.clear();
      fds_.push_back({stop_fd_, POLLIN, 0});
      for (auto& s : streams_)
        if (s && s->in >= 0) {
          fds_.push_back({s->in, POLLIN, 0});
          owner_.push_back(s.get());
        }
      if (::poll(fds_.data(), fds_.size(), -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds_[0].revents) stopping_ = stop_word_came();
      for (std::size_t k = 0; k < owner_.size(); ++k)
        if (fds_[k + 1].revents) copy_raw(*owner_[k]);
      close_ended();
    }
    for (auto& s : streams_)
      if (s && s->in >= 0) {
        s->no_wait = true;
        copy_raw(*s);
      }
    streams_.clear();
  }
  void copy_raw(Stream& s) {
    const ssize_t r = ::read(s.in, buf_.get(), kReadSize);
    if (r > 0) {
      pass_raw(s, std::string_view(buf_.get(), static_cast<std::size_t>(r)));
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      ::close(s.in);
      s.in = -1;
    }
  }
  // A stream whose input ended gives Slurm its EOF (its fds close with it).
  void close_ended() {
    for (auto& s : streams_)
      if (s && s->in < 0) s.reset();
  }
  // The stop word (or slurmstepd gone), read with no allocation: task ends are not counted.
  bool stop_word_came() {
    std::int32_t words[64];
    const ssize_t n = ::read(stop_fd_, words, sizeof words);
    if (n == 0) return true;
    for (ssize_t k = 0; k < n / static_cast<ssize_t>(sizeof(std::int32_t)); ++k)
      if (words[k] == kStopWord) return true;
    return stop_requested_.load();
  }

  // Stop words and the local ids of reaped tasks, from slurmstepd's thread. true: stop.
  bool read_control() {
    std::int32_t words[64];
    const ssize_t n = ::read(stop_fd_, words, sizeof words);
    if (n <= 0) return n == 0;  // EOF: the owner is gone; EAGAIN: nothing after all
    bool stop = false;
    const double now = now_s();
    for (ssize_t k = 0; k < n / static_cast<ssize_t>(sizeof(std::int32_t)); ++k) {
      if (words[k] == kStopWord) stop = true;
      if (words[k] >= 0) task_ended(static_cast<std::uint32_t>(words[k]), now);
    }
    return stop;
  }

  // Without gpudiag slurmstepd relays a task's output to EOF and ends what is left of the
  // step (a child that kept the pipe) only once every task of the node exited: so the
  // drain limit starts then, not when one task exits, or a child's lines written while
  // other tasks still run are lost. With the count unknown, per task, as before.
  void task_ended(std::uint32_t id, double now) {
    ended_.insert(id);
    if (local_tasks_ > 0 && ended_.size() < local_tasks_) return;
    for (auto& s : streams_)
      if (s->exited_at == 0 && (local_tasks_ > 0 || s->task == id)) s->exited_at = now;
  }
  // A handoff read after its task's end (both arrive in one poll) still gets the limit.
  bool ended(std::uint32_t id) const {
    return local_tasks_ > 0 ? ended_.size() >= local_tasks_ : ended_.count(id) > 0;
  }

  // Until when poll may sleep: the next exited task's drain limit or the next full pipe's
  // turn to be polled again (WritePacing); -1: for ever.
  double wake_at(double now) const {
    double next = -1;
    auto sooner = [&next](double at) {
      if (next < 0 || at < next) next = at;
    };
    for (auto& s : streams_) {
      if (s->has_pending() && !s->dead && s->write_at > now) sooner(s->write_at);
      if (s->in < 0 || s->exited_at == 0 || s->drain_left != kNoDrain) continue;
      sooner(std::min(s->exited_at + kDrainMax, std::max(s->exited_at, s->last_data) + kQuiet));
    }
    return next;
  }

  // Slurm's pipe has room again: learn from what it still holds how long to wait next time
  // it is full (WritePacing), write, and if it is full again, wait that long before polling it.
  void write_again(Stream& s) {
    if (s.full && s.pipe_size > 0) {
      int queued = 0;
      if (::ioctl(s.out, FIONREAD, &queued) == 0 && queued >= 0)
        s.pacing.came_back(static_cast<std::size_t>(queued), s.pipe_size);
    }
    flush(s);
    settle(s);
    pace(s);
  }
  static void pace(Stream& s) { s.write_at = s.full && s.pacing.wait() > 0 ? now_s() + s.pacing.wait() : 0; }

  // At an exited task's drain limit the input ends after what its pipe holds then. While
  // srun is slow the thread does not read, so "quiet" may only mean held back: those
  // bytes still go out, at srun's pace, and wait in the pipe until then, not in here.
  void end_drained_inputs() {
    const double now = now_s();
    for (auto& s : streams_) {
      if (s->in < 0 || s->exited_at == 0 || s->drain_left != kNoDrain) continue;
      if (now - s->exited_at >= kDrainMax || now - std::max(s->exited_at, s->last_data) >= kQuiet) {
        int queued = 0;
        s->drain_left = ::ioctl(s->in, FIONREAD, &queued) == 0 && queued > 0 ? static_cast<std::size_t>(queued) : 0;
        if (s->drain_left == 0) {
          end_of_input(*s);
          flush(*s);
          settle(*s);
        }
      }
    }
  }

  // Every handoff waiting on the socket; a message that is not exactly one is refused.
  void receive() {
    for (;;) {
      char data[kMaxHandoffBytes + 1];
      const Message m = receive_message(sock_, data, sizeof data);
      if (m.n < 0 && errno == EINTR) continue;
      if (m.n < 0 && errno == EAGAIN) return;
      if (m.n <= 0) {
        sock_open_ = false;  // cannot happen while slurmstepd holds the other end
        return;
      }
      bool taken = false;
      try {
        taken = accept(m.flags, std::string_view(data, static_cast<std::size_t>(m.n)), m.fds, m.nfds);
      } catch (...) {
        // Out of memory: refused as any other message is, so the task relays itself at once.
      }
      if (!taken)
        for (std::size_t k = 0; k < m.nfds; ++k) ::close(m.fds[k]);
    }
  }

  // true: the streams own the message's fds. What may run out of memory comes before the
  // first fd is taken, so on false or a throw every fd is still the message's (receive
  // closes them, and the task gets EOF for its answer).
  bool accept(int flags, std::string_view bytes, const int* fds, std::size_t nfds) {
    if (flags & (MSG_TRUNC | MSG_CTRUNC)) return false;
    auto h = decode_handoff(bytes);
    if (!h || static_cast<int>(nfds) != handoff_fd_count(*h)) return false;
    if (streams_.size() + (h->out ? 1 : 0) + (h->err ? 1 : 0) > kMaxStreams) return false;
    const int answer = fds[nfds - 1];
    if (!is_pipe(answer)) return false;
    for (std::size_t k = 0; k + 1 < nfds; k += 2)
      if (!is_pipe_or_socket(fds[k]) || !is_pipe(fds[k + 1])) return false;
    // The streams, with no fd yet, and the slots of their destinations.
    std::unique_ptr<Stream> made[2];
    Stream** slot[2] = {nullptr, nullptr};
    std::size_t n = 0;
    for (const auto& [wanted, tag] : {std::pair{h->out, h->tag_out}, std::pair{h->err, h->tag_err}}) {
      if (!wanted) continue;
      made[n] = std::make_unique<Stream>(-1, -1, tag, h->tag, h->max_line);
      struct stat st;
      if (::fstat(fds[2 * n], &st) == 0) slot[n] = &holders_[{st.st_dev, st.st_ino}];
      ++n;
    }
    // Nothing below allocates (streams_ has room for kMaxStreams).
    for (std::size_t i = 0; i < n; ++i) {
      Stream& s = *made[i];
      s.out = fds[2 * i];
      s.in = fds[2 * i + 1];
      set_nonblocking(s.out);
      set_nonblocking(s.in);
      s.holder = slot[i];
      s.stop_requested = &stop_requested_;
      if (is_pipe(s.out)) {
        const int size = ::fcntl(s.out, F_GETPIPE_SZ);
        s.pipe_size = size > 0 ? static_cast<std::size_t>(size) : 0;
      }
      s.task = h->local_id;
      if (ended(h->local_id)) s.exited_at = now_s();
      streams_.push_back(std::move(made[i]));
    }
    // The task waits for this before it puts the pipes in place (hand_to_node_relay).
    set_nonblocking(answer);
    [[maybe_unused]] ssize_t w = ::write(answer, "y", 1);
    ::close(answer);
    return true;
  }

  // A stream whose input ended and whose bytes are out gives Slurm its EOF.
  void reap() {
    std::size_t keep = 0;
    for (auto& s : streams_) {
      if (s->done()) held_ -= s->counted;
      else streams_[keep++] = std::move(s);
    }
    streams_.resize(keep);
  }

  // The step's budget (kRelayStepBudget) counts what every stream's pending holds.
  void settle(Stream& s) {
    static const std::size_t inline_capacity = std::string().capacity();  // inside the Stream
    const std::size_t now = s.pending.capacity() > inline_capacity ? s.pending.capacity() : 0;
    held_ = held_ - s.counted + now;
    s.counted = now;
    if (held_ > peak_held_.load(std::memory_order_relaxed)) peak_held_.store(held_, std::memory_order_relaxed);
  }

  // How much the stream may read now: nothing while it holds bytes srun has not taken,
  // else what fits its own budget and the step's room after tagging. A stream whose
  // srun is gone reads on (so its program never blocks) and keeps nothing.
  std::size_t read_limit(const Stream& s) const {
    if (s.in < 0 || s.has_pending()) return 0;
    if (s.dead) return kReadSize;
    const std::size_t others = held_ - s.counted;
    const std::size_t room = kRelayStepBudget > others ? kRelayStepBudget - others : 0;
    // A sliver of room waits for more: reads stay worth their syscall, and no buffer is
    // so small that the allocator rounds it up past what was counted.
    if (room < kRelayStreamBudget / 16) return 0;
    return relay_read_limit(s.lines, s.tag && !s.raw, room);
  }

  // Reads, tags and writes on while srun takes it all and the pipe has more, so that a
  // steady stream costs a read and a write per piece and no poll between them (a poll
  // wakes the thread and registers every fd again). At most kRoundRead per round: the
  // other streams get their turn.
  void pump(Stream& s) {
    for (std::size_t got = 0; got < kRoundRead;) {
      const std::size_t limit = read_limit(s);
      if (limit == 0) return;
      const ReadResult r = read_once(s, buf_.get(), limit);
      flush(s);
      settle(s);
      pace(s);
      if (r.ended || r.emptied || s.has_pending()) return;
      got += limit;
    }
  }

  // At stop: what srun takes now goes out, in pieces within the budgets, and at most
  // kFinalReadMax of input; nothing waits. The rest is dropped, as slurmstepd, which has
  // stopped waiting for the step's output by now, drops what it still holds.
  void final_drain() {
    for (auto& s : streams_) s->no_wait = true;  // out of memory too (pass_raw): nothing waits
    // A chunk half written goes on first, so the streams that wait for its destination
    // still get their turn in this drain.
    for (auto& s : streams_)
      if (s->holder && *s->holder == s.get()) flush(*s);
    for (auto& s : streams_) {
      flush(*s);
      for (std::size_t got = 0; s->in >= 0 && !s->has_pending() && got < kFinalReadMax;) {
        const std::size_t limit = read_limit(*s);
        pollfd p{s->in, POLLIN, 0};
        if (limit == 0 || ::poll(&p, 1, 0) <= 0 || read_once(*s, buf_.get(), limit).ended) break;
        got += limit;
        flush(*s);
        settle(*s);
      }
      if (s->in >= 0) end_of_input(*s);
      flush(*s);
      settle(*s);
      held_ -= s->counted;
      // Dropped with a chunk half written: its destination ends inside a line, so nothing
      // else is written there, or another line would start in the middle of that one.
      if (s->holder && *s->holder == s.get() && s->has_pending()) {
        *s->holder = kCutLine;
        s->holder = nullptr;
      }
      s.reset();  // its memory and fds go back before the next stream reads
    }
    streams_.clear();
  }

  int sock_, stop_fd_;
  const std::atomic<bool>& stop_requested_;
  std::atomic<std::size_t>& peak_held_;
  const std::size_t local_tasks_;
  std::set<std::uint32_t> ended_;  // local ids of the tasks slurmstepd reaped
  bool sock_open_ = true;
  std::size_t held_ = 0;  // the capacity of every stream's pending (Stream::counted)
  std::size_t turn_ = 0;
  // Not cleared: a step whose tasks write little never touches most of its pages.
  std::unique_ptr<char[]> buf_;
  // Per destination (device, inode of the open file Slurm's fd leads to): the stream whose
  // chunk is half written there (Stream::holder). std::map keeps each slot where it is;
  // declared before streams_, so it outlives every Stream that points into it.
  std::map<std::pair<dev_t, ino_t>, Stream*> holders_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<pollfd> fds_;
  std::vector<Stream*> owner_;
  bool stopping_ = false;
};

}  // namespace

void* NodeRelay::thread_main(void* self) {
  auto* r = static_cast<NodeRelay*>(self);
  try {
    Loop(r->relay_end_, r->stop_r_, r->stop_requested_, r->local_tasks_, r->peak_held_).run();
  } catch (...) {
    // Only a failed allocation of the loop's own buffers gets here, before any stream
    // (Loop::run passes the streams on untagged whatever else fails).
  }
  // However the loop ended (at stop, or early: an allocation, a failed poll), no handoff
  // may wait for it: later ones fail at once (EPIPE), and those already queued give back
  // their fds, so each task gets EOF for its answer and relays itself (adversary review 6).
  refuse_handoffs(r->relay_end_);
  return nullptr;
}

std::optional<std::string> NodeRelay::open(int local_tasks) {
  if (opened_) return std::nullopt;
  int sv[2], pp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return std::string("cannot create the relay's socket: ") + std::strerror(errno);
  if (::pipe2(pp, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return std::string("cannot create a pipe: ") + std::strerror(e);
  }
  relay_end_ = sv[0];
  task_end_ = sv[1];
  local_tasks_ = local_tasks;
  stop_r_ = pp[0];
  stop_w_ = pp[1];
  owner_ = ::getpid();
  opened_ = true;
  return std::nullopt;
}

std::optional<std::string> NodeRelay::start_thread() {
  if (!opened_ || started_ || refused_ || ::getpid() != owner_) return std::nullopt;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kThreadStack);
  int rc;
  {
    // The thread takes no signal of slurmstepd's, and writes to a gone srun fail with
    // EPIPE instead of raising SIGPIPE.
    EverySignalBlocked blocked;
    rc = pthread_create(&thread_, &attr, &NodeRelay::thread_main, this);
  }
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    // The forked tasks hold copies of both ends, so closing ours would leave their
    // handoffs queued and unanswered for 5 s: a shutdown reaches every copy, and each
    // handoff then fails with EPIPE.
    refuse_handoffs(relay_end_);
    refused_ = true;
    return std::string("cannot start the relay thread: ") + std::strerror(rc);
  }
  started_ = true;
  return std::nullopt;
}

std::optional<std::string> NodeRelay::start(int local_tasks) {
  if (auto err = open(local_tasks)) return err;
  return start_thread();
}

void NodeRelay::stop() {
  if (!opened_ || ::getpid() != owner_) return;
  if (started_) {
    // A full pipe still wakes the thread, which then finds the flag.
    stop_requested_.store(true);
    const std::int32_t word = kStopWord;
    while (::write(stop_w_, &word, sizeof word) < 0 && errno == EINTR) {
    }
    pthread_join(thread_, nullptr);
    started_ = false;
  }
  opened_ = false;
  for (int fd : {relay_end_, task_end_, stop_r_, stop_w_}) ::close(fd);
  relay_end_ = task_end_ = stop_r_ = stop_w_ = -1;
}

void NodeRelay::task_exited(int local_id) {
  if (!opened_ || ::getpid() != owner_ || local_id < 0) return;
  const std::int32_t word = local_id;
  // A full pipe (thousands of exits unread) only costs that task its drain limit.
  while (::write(stop_w_, &word, sizeof word) < 0 && errno == EINTR) {
  }
}

NodeRelay::~NodeRelay() { stop(); }

}  // namespace gpudiag
