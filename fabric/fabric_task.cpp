#include "fabric/fabric_task.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "fabric/rdma_verbs.h"
#include "util/control_bytes.h"
#include "util/tcp.h"

namespace gpudiag::fabric {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kConnect_s = 3;          // to a peer's listener or to srun
constexpr double kHeader_s = 3;           // a connection that says nothing is dropped
constexpr std::size_t kMaxInbound = 64;
constexpr double kQuiet_s = 0.5;          // silent this long, a connection may make room   // connections at once; the oldest silent one goes first
constexpr std::size_t kChunk = 256 * 1024;
constexpr double kNcclPair_s = 20;        // a pair's probe: CUDA's start, NCCL's init, the all_reduce

int ms_left(Clock::time_point until) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1000));
}

std::uint64_t usec_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}

bool send_line(int fd, const std::string& line) {
  std::size_t off = 0;
  while (off < line.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 2000) <= 0) return false;
    ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

struct Inbound {
  int fd = -1;
  std::string header;
  bool authed = false;
  std::uint32_t from = 0;
  Clock::time_point since, start;
  std::uint64_t bytes = 0;
};

// Sends to a peer for `ms` (0: the header only), as srun ordered; "" or why it failed.
std::string send_to(const Order& o, const std::string& token, std::uint32_t me) {
  std::string error;
  int fd = tcp_connect(o.addr, o.port, kConnect_s, error);
  if (fd < 0) return error;
  if (!send_line(fd, format_data_header(token, me))) {
    ::close(fd);
    return "the connection closed before the test began";
  }
  static const std::vector<char> zeros(kChunk, 0);
  const auto until = Clock::now() + std::chrono::milliseconds(o.ms);
  while (o.ms > 0 && Clock::now() < until) {
    pollfd p{fd, POLLOUT, 0};
    int rc = ::poll(&p, 1, std::max(1, ms_left(until)));
    if (rc <= 0) continue;
    ssize_t n = ::send(fd, zeros.data(), zeros.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      error = std::string("the peer stopped reading: ") + std::strerror(errno);
      break;
    }
  }
  // The receiver times up to our EOF, and closes after it: no TIME_WAIT on its port.
  ::shutdown(fd, SHUT_WR);
  pollfd p{fd, POLLIN, 0};
  char c;
  const auto drain_until = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < drain_until && ::poll(&p, 1, ms_left(drain_until)) > 0) {
    ssize_t n = ::recv(fd, &c, 1, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  ::close(fd);
  return error;
}

}  // namespace

std::string launcher_of(int argc, const char* const* argv) {
  if (argc <= 0 || !argv || !argv[0]) return "";
  std::string prog = argv[0];
  auto slash = prog.rfind('/');
  if (slash != std::string::npos) prog = prog.substr(slash + 1);
  if (prog == "torchrun") return "torchrun";
  if (prog.rfind("python", 0) == 0) {
    for (int i = 1; i + 1 < argc && argv[i]; ++i) {
      if (std::string(argv[i]) != "-m" || !argv[i + 1]) continue;
      const std::string mod = argv[i + 1];
      return mod == "torch.distributed.run" || mod == "torch.distributed.launch" ? "torchrun" : "";
    }
  }
  return "";
}

TaskOutcome run_fabric_task(TaskSide s) {
  TaskOutcome out;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.deadline_s));
  int listen_fd = -1;
  if (s.leader) {
    int port = 0;
    std::string error;
    if (s.listen_addr.empty()) {
      s.hello.listen_error = "no address towards the rendezvous (no route to MASTER_ADDR)";
    } else {
      if (s.listen_port > 0) listen_fd = tcp_listen(s.listen_addr, s.listen_port, 128, port, error);
      if (listen_fd < 0 && s.listen_port > 0)
        s.hello.listen_error = "cannot listen on the rendezvous port " + s.listen_addr + ":" +
                               std::to_string(s.listen_port) + ": " + error;
      if (listen_fd < 0) listen_fd = tcp_listen(s.listen_addr, 0, 128, port, error);
      if (listen_fd < 0 && s.hello.listen_error.empty())
        s.hello.listen_error = "cannot listen on " + s.listen_addr + ": " + error;
    }
    if (listen_fd >= 0) {
      s.hello.listen_addr = s.listen_addr;
      s.hello.listen_port = port;
    }
  }
  std::unique_ptr<RdmaNode> rdma;
  if (s.leader && s.hello.nnodes >= 2) {  // one node has no pair to test
    if (!s.rdma) s.hello.rdma_none = "fabric.rdma: false";
    else rdma = RdmaNode::open(s.rdma_library, s.nccl_ib_hca, s.nccl_ib_gid_index, s.hello.rdma_none);
    if (rdma) s.hello.rdma_hca = rdma->hca_port();
    s.hello.nccl = s.nccl_none.empty();
    s.hello.nccl_none = s.nccl_none;
  }
  int srun = tcp_connect(s.srun_addr, s.endpoint.port, kConnect_s, out.detail);
  if (srun < 0) {
    out.detail = "cannot reach srun at " + s.srun_addr + ":" + std::to_string(s.endpoint.port) + ": " + out.detail;
    if (listen_fd >= 0) ::close(listen_fd);
    return out;
  }
  if (!send_line(srun, format_hello(s.endpoint.token, s.hello))) {
    out.detail = "srun took no hello";
    ::close(srun);
    if (listen_fd >= 0) ::close(listen_fd);
    return out;
  }
  std::vector<Inbound> inbound;
  std::string from_srun;
  bool srun_proved = false;  // its first line showed the proof: the rest is srun's
  bool done = false;
  std::vector<char> scratch(kChunk);
  while (!done) {
    if (Clock::now() >= until) {
      out.detail = "no end from srun within " + std::to_string(static_cast<int>(s.deadline_s)) + " s";
      break;
    }
    std::vector<pollfd> fds;
    fds.push_back({srun, POLLIN, 0});
    if (listen_fd >= 0) fds.push_back({listen_fd, POLLIN, 0});
    const std::size_t first_in = fds.size();
    for (const auto& c : inbound) fds.push_back({c.fd, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), ms_left(until));
    if (n < 0 && errno != EINTR) break;
    const auto now = Clock::now();
    // srun's orders, one line at a time.
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[kLineMax];
      ssize_t got = ::recv(srun, buf, sizeof buf, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        out.detail = "srun closed the connection without an end";
        break;
      }
      if (got > 0) from_srun.append(buf, static_cast<std::size_t>(got));
      for (auto nl = from_srun.find('\n'); nl != std::string::npos && !done; nl = from_srun.find('\n')) {
        const std::string line = from_srun.substr(0, nl);
        from_srun.erase(0, nl + 1);
        if (!srun_proved) {
          srun_proved = is_srun_proof(line, s.endpoint.proof);
          if (!srun_proved) {
            out.detail = "an answer without srun's proof (another process holds srun's port)";
            done = true;
          }
          continue;
        }
        auto order = parse_order(line);
        if (!order) continue;
        if (order->kind == Order::kEnd) {
          out.kind = order->ok ? TaskOutcome::kOk : TaskOutcome::kFail;
          done = true;
        } else if (s.leader) {
          TestReport r;
          r.peer = order->peer;
          r.kind = TestReport::kSent;
          if (order->kind == Order::kSend) {
            r.error = send_to(*order, s.endpoint.token, s.hello.node_id);
          } else if (order->kind == Order::kNccl) {
            r.kind = TestReport::kNcclDone;
            const double left = std::chrono::duration<double>(until - Clock::now()).count();
            if (!s.nccl_none.empty()) {
              r.kind = order->rank == 0 ? TestReport::kNcclId : TestReport::kNcclDone;
              r.error = "no NCCL on " + s.hello.node + ": " + s.nccl_none;
            } else if (left < 2) {
              r.error = "no time left for an NCCL pair";
            } else {
              bool said = false;
              auto res = run_nccl_pair(s.nccl_probe, order->rank, order->nccl_id, std::min(kNcclPair_s, left - 1),
                                       [&](const std::string& id) {
                                         TestReport idr;
                                         idr.kind = TestReport::kNcclId;
                                         idr.peer = order->peer;
                                         idr.nccl_id = id;
                                         said = true;
                                         return send_line(srun, format_test_report(idr));
                                       });
              if (order->rank == 0 && !said) {  // srun waits for the id first
                TestReport idr;
                idr.kind = TestReport::kNcclId;
                idr.peer = order->peer;
                idr.error = res.error.empty() ? "the GPU probe made no id" : res.error;
                if (!is_one_printable_line(idr.error)) idr.error = escape_control(idr.error);
                if (!send_line(srun, format_test_report(idr))) done = true;
                continue;
              }
              r.bytes = res.bytes;
              r.usec = res.usec;
              r.error = res.error;
            }
          } else if (!rdma) {
            r.kind = order->kind == Order::kQp ? TestReport::kQp
                                                : (order->kind == Order::kConnect ? TestReport::kReady : TestReport::kWritten);
            r.error = "no RDMA on " + s.hello.node;
          } else if (order->kind == Order::kQp) {
            r.kind = TestReport::kQp;
            if (auto q = rdma->make_qp(order->peer, r.error)) r.qp = *q;
          } else if (order->kind == Order::kConnect) {
            r.kind = TestReport::kReady;
            r.error = rdma->connect(order->peer, order->qp);
          } else {
            r.kind = TestReport::kWritten;
            auto w = rdma->write_for(order->peer, order->ms);
            r.bytes = w.bytes;
            r.usec = w.usec;
            r.error = w.error;
          }
          if (!is_one_printable_line(r.error)) r.error = escape_control(r.error);
          if (r.error.size() > 300) r.error = r.error.substr(0, 300);  // a report line is bounded
          if (!send_line(srun, format_test_report(r))) done = true;
        }
      }
      if (from_srun.size() >= kLineMax) {
        out.detail = "srun sent a line that is not an order";
        break;
      }
    }
    if (done) break;
    // New test connections; a flood of silent ones loses its oldest first.
    if (listen_fd >= 0 && (fds[1].revents & POLLIN)) {
      for (;;) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (inbound.size() >= kMaxInbound) {
          // A peer sends its header at once: only a connection silent for a while makes
          // room, so a flood cannot push out a test that just connected.
          auto oldest = std::find_if(inbound.begin(), inbound.end(), [&](const Inbound& c) {
            return !c.authed && now - c.since > std::chrono::duration<double>(kQuiet_s);
          });
          if (oldest == inbound.end()) {
            ::close(fd);
            continue;
          }
          ::close(oldest->fd);
          inbound.erase(oldest);
        }
        inbound.push_back(Inbound{fd, {}, false, 0, now, now, 0});
      }
    }
    for (std::size_t i = 0; i < inbound.size(); ++i) {
      Inbound& c = inbound[i];
      const std::size_t k = first_in + i;
      const short rev = k < fds.size() && fds[k].fd == c.fd ? fds[k].revents : 0;
      bool drop = false;
      if (rev & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t got = ::recv(c.fd, scratch.data(), c.authed ? scratch.size() : kLineMax - c.header.size(), 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {
          if (c.authed) {
            TestReport r;
            r.peer = c.from;
            r.bytes = c.bytes;
            r.usec = std::max<std::uint64_t>(1, usec_between(c.start, Clock::now()));
            if (!send_line(srun, format_test_report(r))) done = true;
          }
          drop = true;
        } else if (c.authed) {
          c.bytes += static_cast<std::uint64_t>(got);
        } else {
          c.header.append(scratch.data(), static_cast<std::size_t>(got));
          auto nl = c.header.find('\n');
          if (nl == std::string::npos) {
            drop = c.header.size() >= kLineMax - 1;
          } else {
            auto from = parse_data_header(c.header.substr(0, nl), s.endpoint.token);
            if (!from) {
              drop = true;  // not one of this step's nodes
            } else {
              c.authed = true;
              c.from = *from;
              c.start = Clock::now();
              c.bytes = c.header.size() - nl - 1;  // data that came with the header
              c.header.clear();
            }
          }
        }
      }
      if (!c.authed && !drop && now - c.since > std::chrono::duration<double>(kHeader_s)) drop = true;
      if (drop) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    inbound.erase(std::remove_if(inbound.begin(), inbound.end(), [](const Inbound& c) { return c.fd < 0; }),
                  inbound.end());
  }
  for (auto& c : inbound) ::close(c.fd);
  if (listen_fd >= 0) ::close(listen_fd);
  ::close(srun);
  return out;
}

}  // namespace gpudiag::fabric
