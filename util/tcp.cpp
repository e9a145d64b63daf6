#include "util/tcp.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpudiag {
namespace {

bool numeric(const std::string& addr, int port, sockaddr_storage& ss, socklen_t& len) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(addr.empty() ? nullptr : addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    return false;
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return true;
}

std::string addr_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

}  // namespace

namespace {

// One listening socket on `ss`; -1 with `error` set.
int listen_on(const sockaddr_storage& ss, socklen_t len, bool dual_stack, int backlog, std::string& error) {
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  int on = 1, off = 0;
  // torch's store binds the rendezvous port with SO_REUSEADDR too: no TIME_WAIT of ours blocks it.
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (dual_stack) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0 || ::listen(fd, backlog) != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int tcp_listen(const std::string& addr, int port, int backlog, int& bound_port, std::string& error) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int fd = -1;
  if (addr.empty()) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    std::memcpy(&ss, &a, sizeof a);
    fd = listen_on(ss, sizeof a, true, backlog, error);
    if (fd < 0) {  // a kernel without IPv6: IPv4 alone
      sockaddr_in a4{};
      a4.sin_family = AF_INET;
      a4.sin_addr.s_addr = htonl(INADDR_ANY);
      a4.sin_port = htons(static_cast<std::uint16_t>(port));
      ss = sockaddr_storage{};
      std::memcpy(&ss, &a4, sizeof a4);
      fd = listen_on(ss, sizeof a4, false, backlog, error);
    }
  } else if (!numeric(addr, port, ss, len)) {
    error = "not a numeric address: " + addr;
    return -1;
  } else {
    fd = listen_on(ss, len, false, backlog, error);
  }
  if (fd < 0) return -1;
  sockaddr_storage got{};
  socklen_t got_len = sizeof got;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &got_len);
  bound_port = ntohs(got.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&got)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  return fd;
}

int tcp_connect(const std::string& addr, int port, double timeout_s, std::string& error) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (addr.empty() || !numeric(addr, port, ss, len)) {
    error = "not a numeric address: " + addr;
    return -1;
  }
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    do rc = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
    while (rc < 0 && errno == EINTR);
    int err = 0;
    socklen_t elen = sizeof err;
    if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0) return fd;
    if (rc == 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "no answer in %g s", timeout_s);
      error = buf;
    } else {
      error = std::strerror(err ? err : errno);
    }
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

std::string local_addr_towards(const std::string& addr) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!numeric(addr, 9, ss, len)) return "";
  int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
    sockaddr_storage me{};
    socklen_t me_len = sizeof me;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &me_len) == 0) out = addr_text(me);
  }
  ::close(fd);
  return out;
}

std::string interface_addr(const std::string& name) {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string v4, v6;
  for (ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || name != i->ifa_name) continue;
    sockaddr_storage ss{};
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) {
      std::memcpy(&ss, i->ifa_addr, sizeof(sockaddr_in));
      v4 = addr_text(ss);
    } else if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id: not for a peer
      std::memcpy(&ss, i->ifa_addr, sizeof(sockaddr_in6));
      v6 = addr_text(ss);
    }
  }
  ::freeifaddrs(all);
  return v4.empty() ? v6 : v4;
}

}  // namespace gpudiag
