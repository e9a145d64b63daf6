// The task's half of the node relay (node_relay.h): runs in the task process, as the
// user, between Slurm's fork and its exec of the program.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "spank/relay/node_relay.h"
#include "spank/relay/node_relay_wire.h"
#include "util/task_path.h"

namespace gpudiag {
namespace {

// The thread reads the socket all the time; a full one, or no answer, means it is gone or
// stuck, and the task then relays itself rather than wait.
constexpr int kSendWaitMs = 5000;

// The thread's answer: one byte when it took the streams; EOF when it refused them (it
// closed the pipe), which is also what the kernel gives when it could not pass the fds.
GPUDIAG_TASK_PATH bool accepted(int answer_r) {
  pollfd p{answer_r, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&p, 1, kSendWaitMs);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    char c;
    ssize_t r;
    while ((r = ::read(answer_r, &c, 1)) < 0 && errno == EINTR) {
    }
    if (r == 1) return true;
    errno = ECONNREFUSED;
    return false;
  }
}

GPUDIAG_TASK_PATH bool send_with_fds(int sock, std::string_view bytes, const int* fds, int count) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandoffFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * count);
  std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  for (;;) {
    const ssize_t n = ::sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{sock, POLLOUT, 0};
      if (::poll(&p, 1, kSendWaitMs) > 0) continue;
      errno = ETIMEDOUT;
    }
    return false;
  }
}

}  // namespace

std::optional<std::string> handoff_message(const RelayPlan& plan, int local_id) {
  TaskHandoff h;
  h.local_id = static_cast<std::uint32_t>(local_id);
  h.max_line = static_cast<std::uint32_t>(plan.max_line);
  h.out = plan.out;
  h.err = plan.err;
  h.tag_out = plan.tag_out;
  h.tag_err = plan.tag_err;
  h.tag = plan.tag;
  return encode_handoff(h);
}

std::optional<std::string> hand_to_node_relay(int task_socket, const RelayPlan& plan, int local_id) {
  auto bytes = handoff_message(plan, local_id);
  if (!bytes) return std::string("the tag or line length is out of range");
  return hand_over_streams(task_socket, *bytes, plan.out, plan.err);
}

GPUDIAG_TASK_PATH std::optional<std::string> hand_over_streams(int task_socket, std::string_view message, bool out,
                                                               bool err) {
  if (task_socket < 0) return std::string("no relay thread on this node");

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, answer[2] = {-1, -1};
  auto close_pipes = [&] {
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1], &answer[0], &answer[1]})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
  };
  if ((out && ::pipe2(out_pipe, O_CLOEXEC) != 0) || (err && ::pipe2(err_pipe, O_CLOEXEC) != 0) ||
      ::pipe2(answer, O_CLOEXEC) != 0) {
    std::string why = std::strerror(errno);
    close_pipes();
    return "cannot create pipes: " + why;
  }
  int fds[kMaxHandoffFds];
  int count = 0;
  if (out) {
    fds[count++] = STDOUT_FILENO;
    fds[count++] = out_pipe[0];
  }
  if (err) {
    fds[count++] = STDERR_FILENO;
    fds[count++] = err_pipe[0];
  }
  fds[count++] = answer[1];
  if (!send_with_fds(task_socket, message, fds, count)) {
    std::string why = std::strerror(errno);
    close_pipes();
    return "cannot reach the node's relay thread: " + why;
  }
  // Only the thread may hold the write end now, so its close is our EOF. Refused or not
  // answered, fds 1 and 2 are still Slurm's: what the thread may take later meets closed
  // pipes and lets go of its copies.
  ::close(answer[1]);
  answer[1] = -1;
  if (!accepted(answer[0])) {
    std::string why = errno == ETIMEDOUT ? "it did not answer in 5 s" : "it could not take the streams";
    close_pipes();
    return why;
  }
  // The thread holds Slurm's fds now; the program writes into the pipes.
  if (out) ::dup2(out_pipe[1], STDOUT_FILENO);
  if (err) ::dup2(err_pipe[1], STDERR_FILENO);
  close_pipes();
  return std::nullopt;
}

}  // namespace gpudiag
