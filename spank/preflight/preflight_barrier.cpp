#include "spank/preflight/preflight_barrier.h"

#include <sys/resource.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "util/control_bytes.h"
#include "util/detached_thread.h"
#include "util/step_token.h"
#include "util/tcp.h"

namespace gpudiag {
namespace {

constexpr const char* kReportTag = "gpudiag-barrier";
constexpr std::size_t kNodeMax = 255;     // a host name
constexpr double kClientIdle_s = 10;      // a connection that sends no report in time is dropped
constexpr std::size_t kMaxPending = 256;  // connections without a report yet; the oldest goes first
constexpr std::size_t kSpareFiles = 256;  // srun's own files beside one connection per task

// A decimal number as the formatters write it: digits, no leading zero.
bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 10 && (s.size() == 1 || s[0] != '0') &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool good_node(const std::string& s) {
  return !s.empty() && s.size() <= kNodeMax && is_one_printable_line(s) && s.find(' ') == std::string::npos;
}

// Split on single spaces; exactly `n` fields or none.
std::vector<std::string> fields(const std::string& line, std::size_t n) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (out.size() < n) {
    std::size_t sp = line.find(' ', start);
    if (out.size() + 1 == n) sp = std::string::npos;
    out.push_back(line.substr(start, sp == std::string::npos ? std::string::npos : sp - start));
    if (sp == std::string::npos) break;
    start = sp + 1;
  }
  if (out.size() != n) out.clear();
  return out;
}

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1000));
}

void send_all(int fd, const std::string& text) {
  // Small lines to a socket just connected: one send; a peer that does not read loses it.
  (void)::send(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

struct Client {
  int fd = -1;
  std::string buf;
  Clock::time_point since;
  bool reported = false;  // authenticated and waiting for the verdict
};

// srun's side. Owns everything it touches (no globals): srun may exit while it runs.
void serve(int listen_fd, std::string token, std::string proof, std::uint32_t total, Clock::time_point until) {
  BarrierTally tally;
  tally.total = total;
  std::vector<Client> clients;
  std::optional<BarrierVerdict> verdict;
  std::uint32_t answered = 0;
  while (Clock::now() < until && answered < total) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd, POLLIN, 0});
    for (const auto& c : clients) fds.push_back({c.fd, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), ms_until(until));
    if (n < 0 && errno != EINTR) break;
    const auto now = Clock::now();
    if (fds[0].revents & POLLIN) {
      for (;;) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        std::size_t pending = std::count_if(clients.begin(), clients.end(), [](const Client& c) { return !c.reported; });
        if (pending >= kMaxPending) {
          // A flood of silent connections: drop the oldest, since a task sends its line at once.
          auto oldest = std::find_if(clients.begin(), clients.end(), [](const Client& c) { return !c.reported; });
          ::close(oldest->fd);
          clients.erase(oldest);
        }
        clients.push_back({fd, {}, now, false});
      }
    }
    for (std::size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      const short rev = i + 1 < fds.size() && fds[i + 1].fd == c.fd ? fds[i + 1].revents : 0;
      bool drop = false;
      if (rev & (POLLIN | POLLHUP | POLLERR)) {
        char chunk[kBarrierLineMax];
        ssize_t got = ::recv(c.fd, chunk, sizeof chunk, 0);
        if (got <= 0) {
          drop = true;
        } else if (!c.reported) {
          c.buf.append(chunk, static_cast<std::size_t>(got));
          auto nl = c.buf.find('\n');
          if (nl == std::string::npos) {
            drop = c.buf.size() >= kBarrierLineMax;
          } else {
            auto r = parse_barrier_report(c.buf.substr(0, nl));
            if (!r || !same_token(r->token, token)) {
              drop = true;  // not one of this step's tasks
            } else {
              tally_report(tally, *r);
              c.reported = true;
              if (!r->passed) {
                drop = true;  // a failing task does not wait
                ++answered;
              }
            }
          }
        }
      }
      if (!c.reported && !drop && now - c.since > std::chrono::duration<double>(kClientIdle_s)) drop = true;
      if (drop) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    clients.erase(std::remove_if(clients.begin(), clients.end(), [](const Client& c) { return c.fd < 0; }),
                  clients.end());
    if (!verdict) {
      verdict = barrier_verdict(tally);
      if (verdict) verdict->proof = proof;
    }
    if (verdict) {
      const std::string line = format_barrier_verdict(*verdict);
      for (auto& c : clients) {
        if (!c.reported) continue;
        send_all(c.fd, line);
        ::close(c.fd);
        c.fd = -1;
        ++answered;
      }
      clients.erase(std::remove_if(clients.begin(), clients.end(), [](const Client& c) { return c.fd < 0; }),
                    clients.end());
    }
  }
  // Deadline: the tasks still waiting see the connection close and refuse (kNoVerdict).
  for (auto& c : clients) ::close(c.fd);
  ::close(listen_fd);
}

}  // namespace

std::string format_barrier_env(const BarrierEndpoint& e) {
  return std::to_string(e.port) + ":" + e.token + ":" + e.proof;
}

std::optional<BarrierEndpoint> parse_barrier_env(const std::string& value) {
  const auto colon = value.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto second = value.find(':', colon + 1);
  if (second == std::string::npos) return std::nullopt;
  const std::string port = value.substr(0, colon), token = value.substr(colon + 1, second - colon - 1),
                    proof = value.substr(second + 1);
  if (!all_digits(port) || port.size() > 5 || !is_step_token(token) || !is_step_token(proof)) return std::nullopt;
  BarrierEndpoint e;
  e.port = std::stoi(port);
  e.token = token;
  e.proof = proof;
  if (e.port <= 0 || e.port > 65535) return std::nullopt;
  return e;
}

std::string format_barrier_report(const BarrierReport& r) {
  return std::string(kReportTag) + " " + r.token + " " + std::to_string(r.rank) + (r.passed ? " ok " : " fail ") +
         r.node + "\n";
}

std::optional<BarrierReport> parse_barrier_report(const std::string& line) {
  if (line.size() >= kBarrierLineMax) return std::nullopt;
  auto f = fields(line, 5);
  if (f.empty() || f[0] != kReportTag || !is_step_token(f[1]) || !all_digits(f[2]) ||
      (f[3] != "ok" && f[3] != "fail") || !good_node(f[4]))
    return std::nullopt;
  const unsigned long long rank = std::stoull(f[2]);
  if (rank > 0xffffffffull) return std::nullopt;
  BarrierReport r;
  r.token = f[1];
  r.rank = static_cast<std::uint32_t>(rank);
  r.passed = f[3] == "ok";
  r.node = f[4];
  return r;
}

std::string format_barrier_verdict(const BarrierVerdict& v) {
  return v.go ? "go " + v.proof + "\n" : "stop " + v.proof + " " + v.failed_node + "\n";
}

std::optional<BarrierVerdict> parse_barrier_verdict(const std::string& line) {
  if (line.size() >= kBarrierLineMax) return std::nullopt;
  if (const auto g = fields(line, 2); g.size() == 2 && g[0] == "go" && is_step_token(g[1]))
    return BarrierVerdict{true, "", g[1]};
  const auto f = fields(line, 3);
  if (f.size() == 3 && f[0] == "stop" && is_step_token(f[1]) && good_node(f[2]))
    return BarrierVerdict{false, f[2], f[1]};
  return std::nullopt;
}

void tally_report(BarrierTally& t, const BarrierReport& r) {
  if (!r.passed) {
    if (t.failed_node.empty()) t.failed_node = r.node;
    return;
  }
  if (r.rank < t.total) t.passed.insert(r.rank);  // a rank twice or out of range counts once or not at all
}

std::optional<BarrierVerdict> barrier_verdict(const BarrierTally& t) {
  if (!t.failed_node.empty()) return BarrierVerdict{false, t.failed_node};
  if (t.total > 0 && t.passed.size() == t.total) return BarrierVerdict{true, ""};
  return std::nullopt;
}

BarrierStart start_barrier_server(std::uint32_t total_tasks, double deadline_s) {
  BarrierStart out;
  auto token = new_step_token();
  auto proof = new_step_token();
  if (!token || !proof) {
    out.error = std::string("no random token: ") + std::strerror(errno);
    return out;
  }
  BarrierEndpoint e;
  e.token = *token;
  e.proof = *proof;
  // Every task holds a connection until the verdict.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
      total_tasks + kSpareFiles > nofile.rlim_cur) {
    out.error = "the step has " + std::to_string(total_tasks) + " tasks and srun may open only " +
                std::to_string(nofile.rlim_cur) + " files (ulimit -n)";
    return out;
  }
  int fd = tcp_listen("", 0, 1024, e.port, out.error);
  if (fd < 0) return out;
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
  out.error = start_detached_thread(
      [fd, token = e.token, proof = e.proof, total_tasks, until] { serve(fd, token, proof, total_tasks, until); });
  if (!out.error.empty()) {
    ::close(fd);
    return out;
  }
  out.endpoint = e;
  return out;
}

BarrierOutcome await_barrier(const std::string& srun_addr, const BarrierEndpoint& e, const BarrierReport& report,
                             double connect_s, double deadline_s) {
  BarrierOutcome out;
  const auto until = Clock::now() + std::chrono::duration<double>(deadline_s);
  int fd = tcp_connect(srun_addr, e.port, connect_s, out.detail);
  if (fd < 0) return out;  // kUnreachable
  const std::string line = format_barrier_report(report);
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    out.detail = std::strerror(errno);
    ::close(fd);
    return out;
  }
  out.kind = BarrierOutcome::kNoVerdict;
  if (!report.passed) {  // nothing to wait for
    ::close(fd);
    return out;
  }
  std::string buf;
  while (buf.find('\n') == std::string::npos && buf.size() < kBarrierLineMax) {
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (left <= 0) {
      out.detail = "no verdict within " + std::to_string(static_cast<int>(deadline_s)) + " s";
      break;
    }
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, left);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char chunk[kBarrierLineMax];
    ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      out.detail = "srun closed the connection without a verdict";
      break;
    }
    buf.append(chunk, static_cast<std::size_t>(got));
  }
  ::close(fd);
  auto nl = buf.find('\n');
  if (nl == std::string::npos) {
    if (out.detail.empty()) out.detail = "no verdict";
    return out;
  }
  auto v = parse_barrier_verdict(buf.substr(0, nl));
  if (!v) {
    out.detail = "an answer that is not a verdict";
    return out;
  }
  if (!same_token(v->proof, e.proof)) {
    out.detail = "an answer without srun's proof (another process holds srun's port)";
    return out;
  }
  out.kind = v->go ? BarrierOutcome::kGo : BarrierOutcome::kStop;
  out.failed_node = v->failed_node;
  return out;
}

bool barrier_allows_start(bool passed, BarrierOutcome::Kind kind) { return passed && kind == BarrierOutcome::kGo; }

bool step_has_no_srun(const std::optional<std::string>& step_launcher_port) {
  return step_launcher_port && *step_launcher_port == "0";
}

}  // namespace gpudiag
