#include "spank/preflight/preflight_barrier.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "util/control_bytes.h"

namespace gpudiag {
namespace {

constexpr const char* kReportTag = "gpudiag-barrier";
constexpr std::size_t kTokenHex = 32;
constexpr std::size_t kNodeMax = 255;     // a host name
constexpr double kClientIdle_s = 10;      // a connection that sends no report in time is dropped
constexpr std::size_t kMaxPending = 256;  // connections without a report yet; the oldest goes first
constexpr std::size_t kSpareFiles = 256;  // srun's own files beside one connection per task

bool all_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

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

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;  // no early exit: the time says nothing about the token
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
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
void serve(int listen_fd, std::string token, std::uint32_t total, Clock::time_point until) {
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
    if (!verdict) verdict = barrier_verdict(tally);
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

int listening_socket(int& port, std::string& error) {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int off = 0;  // IPv4 tasks too ($SLURM_LAUNCH_NODE_IPADDR is usually IPv4)
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      error = std::strerror(errno);
      if (fd >= 0) ::close(fd);
      return -1;
    }
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::listen(fd, 1024) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

// Connects within `timeout_s`; -1 with `error` set otherwise.
int connect_to(const std::string& host, int port, double timeout_s, std::string& error) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    error = std::string("not a numeric address: ") + ::gai_strerror(rc);
    return -1;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    ::freeaddrinfo(res);
    return -1;
  }
  rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
    int err = 0;
    socklen_t len = sizeof err;
    if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) return fd;
    error = rc == 0 ? "no answer" : std::strerror(err ? err : errno);
    ::close(fd);
    return -1;
  }
  if (rc != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string format_barrier_env(const BarrierEndpoint& e) { return std::to_string(e.port) + ":" + e.token; }

std::optional<BarrierEndpoint> parse_barrier_env(const std::string& value) {
  auto colon = value.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string port = value.substr(0, colon), token = value.substr(colon + 1);
  if (!all_digits(port) || port.size() > 5 || token.size() != kTokenHex || !all_hex(token)) return std::nullopt;
  BarrierEndpoint e;
  e.port = std::stoi(port);
  e.token = token;
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
  if (f.empty() || f[0] != kReportTag || f[1].size() != kTokenHex || !all_hex(f[1]) || !all_digits(f[2]) ||
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

std::string format_barrier_verdict(const BarrierVerdict& v) { return v.go ? "go\n" : "stop " + v.failed_node + "\n"; }

std::optional<BarrierVerdict> parse_barrier_verdict(const std::string& line) {
  if (line == "go") return BarrierVerdict{true, ""};
  if (line.rfind("stop ", 0) == 0 && good_node(line.substr(5))) return BarrierVerdict{false, line.substr(5)};
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
  unsigned char raw[kTokenHex / 2];
  if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    out.error = std::string("no random token: ") + std::strerror(errno);
    return out;
  }
  static const char* hex = "0123456789abcdef";
  BarrierEndpoint e;
  for (unsigned char c : raw) {
    e.token += hex[c >> 4];
    e.token += hex[c & 15];
  }
  // Every task holds a connection until the verdict.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
      total_tasks + kSpareFiles > nofile.rlim_cur) {
    out.error = "the step has " + std::to_string(total_tasks) + " tasks and srun may open only " +
                std::to_string(nofile.rlim_cur) + " files (ulimit -n)";
    return out;
  }
  int fd = listening_socket(e.port, out.error);
  if (fd < 0) return out;
  // srun unloads its plugins (dlclose) at exit, and the thread may still be waiting then:
  // keep this code mapped until the process ends, so srun's exit never waits for it.
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&serve), &self) && self.dli_fname)
    ::dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  // srun's signals stay with srun's own threads.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
  try {
    std::thread(serve, fd, e.token, total_tasks, until).detach();
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  } catch (const std::exception& ex) {
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(fd);
    out.error = std::string("no thread: ") + ex.what();
    return out;
  }
  out.endpoint = e;
  return out;
}

BarrierOutcome await_barrier(const std::string& srun_addr, const BarrierEndpoint& e, const BarrierReport& report,
                             double connect_s, double deadline_s) {
  BarrierOutcome out;
  const auto until = Clock::now() + std::chrono::duration<double>(deadline_s);
  int fd = connect_to(srun_addr, e.port, connect_s, out.detail);
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
  out.kind = v->go ? BarrierOutcome::kGo : BarrierOutcome::kStop;
  out.failed_node = v->failed_node;
  return out;
}

bool barrier_allows_start(bool passed, BarrierOutcome::Kind kind) { return passed && kind == BarrierOutcome::kGo; }

bool step_has_no_srun(const std::optional<std::string>& step_launcher_port) {
  return step_launcher_port && *step_launcher_port == "0";
}

}  // namespace gpudiag
