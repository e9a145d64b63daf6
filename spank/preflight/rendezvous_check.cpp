#include "spank/preflight/rendezvous_check.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <tuple>

#include "util/control_bytes.h"
#include "util/detached_thread.h"

namespace gpudiag {
namespace {

std::string find(const EnvList& env, const std::string& name) {
  for (const auto& [k, v] : env)
    if (k == name) return v;
  return "";
}

bool has(const EnvList& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
}

int port_number(const std::string& text) {
  auto digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (text.empty() || text.size() > 5 || !std::all_of(text.begin(), text.end(), digit)) return 0;
  int p = std::stoi(text);
  return p > 0 && p <= 65535 ? p : 0;
}

// "host:port", "[v6]:port" or a bare host, as torchrun's --rdzv-endpoint takes it.
std::pair<std::string, int> split_endpoint(const std::string& ep) {
  if (!ep.empty() && ep.front() == '[') {
    auto close = ep.find(']');
    if (close == std::string::npos) return {ep, 0};
    int port = (close + 1 < ep.size() && ep[close + 1] == ':') ? port_number(ep.substr(close + 2)) : 0;
    return {ep.substr(1, close - 1), port};
  }
  auto colon = ep.rfind(':');
  if (colon == std::string::npos || ep.find(':') != colon) return {ep, 0};  // bare host or bare v6
  return {ep.substr(0, colon), port_number(ep.substr(colon + 1))};
}

// An IPv4 or IPv6 address written out: what MASTER_ADDR is where Slurm's NodeAddr is one.
bool numeric_address(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

struct Lookup {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  std::vector<std::string> addresses;
};

void resolve(AddrLookup lookup, const std::string& host, Lookup& out, int flags = 0) {
  struct addrinfo hints {};
  hints.ai_flags = flags;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address, as torch's own lookup
  struct addrinfo* res = nullptr;
  int rc = lookup(host.c_str(), nullptr, &hints, &res);
  std::vector<std::string> addresses;
  if (rc == 0) {
    for (auto* ai = res; ai; ai = ai->ai_next) {
      char text[NI_MAXHOST] = {};
      if (::getnameinfo(ai->ai_addr, ai->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) == 0 &&
          std::find(addresses.begin(), addresses.end(), text) == addresses.end())
        addresses.emplace_back(text);
    }
    ::freeaddrinfo(res);
  }
  std::lock_guard<std::mutex> lock(out.m);
  out.rc = rc;
  out.addresses = std::move(addresses);
  out.done = true;
  out.cv.notify_all();
}

// The interface that holds `local` (a numeric address), or "": the name getifaddrs gives
// it (for IPv4 the address's label, as Gloo matches GLOO_SOCKET_IFNAME).
std::string interface_by_getifaddrs(const std::string& local) {
  struct ifaddrs* list = nullptr;
  if (local.empty() || ::getifaddrs(&list) != 0) return "";
  std::string name;
  for (struct ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    const socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    char host[NI_MAXHOST];
    if (::getnameinfo(i->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0 && local == host)
      name = i->ifa_name;
  }
  ::freeifaddrs(list);
  return name;
}

// The same for an IPv4 address, from one SIOCGIFCONF on a socket already open: getifaddrs
// dumps every link with its statistics over netlink, most of the rendezvous check's time
// in every slurmstepd (docs/BENCHMARKS.md, "A launch as cheap as pyxis"). SIOCGIFCONF lists
// the IPv4 addresses by label, as getifaddrs names them. "" when not found here.
std::string ipv4_interface(int fd, const struct in_addr& local) {
  struct ifreq reqs[128];
  struct ifconf ic {};
  ic.ifc_len = sizeof reqs;
  ic.ifc_req = reqs;
  if (::ioctl(fd, SIOCGIFCONF, &ic) != 0 || ic.ifc_len < 0) return "";
  return sole_ipv4_holder(reqs, std::min(static_cast<std::size_t>(ic.ifc_len) / sizeof(struct ifreq), std::size(reqs)),
                          local);
}

// The interface that holds the local address `ss` of the socket `fd`, or "".
std::string interface_holding(int fd, const struct sockaddr_storage& ss, const std::string& local) {
  if (ss.ss_family == AF_INET) {
    struct sockaddr_in a;
    std::memcpy(&a, &ss, sizeof a);
    // A machine with more addresses than one call lists still has getifaddrs.
    if (std::string name = ipv4_interface(fd, a.sin_addr); !name.empty()) return name;
  }
  return interface_by_getifaddrs(local);
}

// A UDP connect() sends nothing: it only asks the kernel for a route. The local address
// it picks tells which interface reaches the target (`local_interface`).
std::string route_error(const std::vector<std::string>& addresses, int port, std::string& local_interface) {
  std::string last;
  for (const auto& a : addresses) {
    struct addrinfo hints {};
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_DGRAM;
    struct addrinfo* res = nullptr;
    if (::getaddrinfo(a.c_str(), std::to_string(port > 0 ? port : 9).c_str(), &hints, &res) != 0) continue;
    int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : ::connect(fd, res->ai_addr, res->ai_addrlen);
    int err = errno;
    if (rc == 0) {
      struct sockaddr_storage ss {};
      socklen_t len = sizeof ss;
      char host[NI_MAXHOST];
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
          ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0)
        local_interface = interface_holding(fd, ss, host);
    }
    if (fd >= 0) ::close(fd);
    ::freeaddrinfo(res);
    if (rc == 0) return "";
    last = std::strerror(err);
  }
  return last;
}

// What torch's TCPStore server does on the first node: listen on every address.
std::string bind_error(int port) {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int rc = -1;
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in6 a {};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof a);
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";  // no socket at all: nothing to say about the port
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof a);
  }
  int err = errno;
  ::close(fd);
  return rc == 0 ? "" : std::strerror(err);
}

}  // namespace

std::string sole_ipv4_holder(const struct ifreq* list, std::size_t n, const struct in_addr& local) {
  std::string name;
  for (std::size_t i = 0; i < n; ++i) {
    if (list[i].ifr_addr.sa_family != AF_INET) continue;
    struct sockaddr_in a;
    std::memcpy(&a, &list[i].ifr_addr, sizeof a);
    if (a.sin_addr.s_addr != local.s_addr) continue;
    if (!name.empty()) return "";  // two interfaces hold it: getifaddrs's order decides
    name.assign(list[i].ifr_name, ::strnlen(list[i].ifr_name, IFNAMSIZ));
  }
  return name;
}

std::vector<RendezvousTarget> rendezvous_targets(const EnvList& user, const EnvList& plugin, bool first_node) {
  std::vector<RendezvousTarget> out;
  auto add = [&](const std::string& var, const std::string& port_var) {
    const bool user_set = has(user, var);
    std::string value = user_set ? find(user, var) : find(plugin, var);
    if (value.empty()) return;
    RendezvousTarget t;
    t.var = var;
    t.user_set = user_set;
    if (var == "PET_RDZV_ENDPOINT") {
      std::tie(t.host, t.port) = split_endpoint(value);
    } else {
      t.host = value;
      t.port = port_number(has(user, port_var) ? find(user, port_var) : find(plugin, port_var));
    }
    if (t.host.empty()) return;
    // The plugin's own address names the step's first node: that node hosts the store.
    t.bind_here = first_node && !user_set && !has(user, port_var) && t.port > 0;
    for (auto& seen : out) {
      if (seen.host != t.host) continue;
      seen.user_set = seen.user_set || t.user_set;  // a user's value fails, so it counts
      return;
    }
    out.push_back(t);
  };
  add("MASTER_ADDR", "MASTER_PORT");
  add("PET_MASTER_ADDR", "PET_MASTER_PORT");
  add("PET_RDZV_ENDPOINT", "");
  return out;
}

RendezvousFacts gather_rendezvous(const RendezvousTarget& target, double deadline_s, AddrLookup addr_lookup) {
  RendezvousFacts f;
  f.target = target;
  auto lookup = std::make_shared<Lookup>();
  if (numeric_address(target.host)) {
    // No resolver is asked (AI_NUMERICHOST), so nothing can hang: no thread. In slurmstepd
    // a thread per step costs its start, a wait for a core on a loaded node, and a malloc
    // arena that every later fork of a task copies (docs/BENCHMARKS.md, "A launch as cheap
    // as pyxis").
    resolve(addr_lookup, target.host, *lookup, AI_NUMERICHOST);
  } else {
    // A resolver that hangs past the deadline can outlive the step, and slurmstepd unloads
    // its plugins at the end: start_detached_thread keeps this code mapped, and the thread
    // takes none of slurmstepd's signals.
    // Nothing may leave the thread: an exception there would end slurmstepd.
    const auto body = [addr_lookup, lookup, host = target.host] {
      try {
        resolve(addr_lookup, host, *lookup);
      } catch (...) {
        std::lock_guard<std::mutex> lock(lookup->m);
        lookup->rc = EAI_MEMORY;
        lookup->done = true;
        lookup->cv.notify_all();
      }
    };
    if (!start_detached_thread(body).empty())
      resolve(addr_lookup, target.host, *lookup);  // no thread to be had: look up without a deadline
  }
  {
    std::unique_lock<std::mutex> lock(lookup->m);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
    if (!lookup->cv.wait_until(lock, until, [&] { return lookup->done; })) {
      f.timed_out = true;  // the thread finishes on its own; it holds its own state
      return f;
    }
    if (lookup->rc != 0) {
      f.resolve_error = ::gai_strerror(lookup->rc);
      return f;
    }
    f.addresses = lookup->addresses;
  }
  if (f.addresses.empty()) {
    f.resolve_error = "no address";
    return f;
  }
  f.route_error = route_error(f.addresses, target.port, f.local_interface);
  if (f.route_error.empty() && target.bind_here) f.bind_error = bind_error(target.port);
  return f;
}

}  // namespace gpudiag
