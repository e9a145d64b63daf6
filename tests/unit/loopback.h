#pragma once
// Test-only TCP over loopback, for the tests that play another user on a step's port
// (the preflight barrier, the fabric test): a listener on a free port, and a connection
// that says something and stays open.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace gpudiag::test {

// A listening socket on 127.0.0.1 and a free port (written to *port); -1 on failure.
inline int loopback_listener(int* port) {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 8) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(l);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return l;
}

// Connects to 127.0.0.1:port, sends `text` and leaves the socket open; -1 on failure.
inline int loopback_say(int port, const std::string& text) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  return fd;
}

// Another user's listener: accepts one connection, reads what the task says, answers
// `lie`, and holds the connection a moment before it closes.
inline void answer_one(int listener, const std::string& lie) {
  int c = ::accept(listener, nullptr, nullptr);
  if (c < 0) return;
  char buf[4096];
  (void)::recv(c, buf, sizeof buf, 0);
  (void)::send(c, lie.data(), lie.size(), MSG_NOSIGNAL);
  ::usleep(500 * 1000);
  ::close(c);
}

// What a spy's connection `fd` reads in about `ms` milliseconds, without waiting for
// more: it ends early when the other side closes.
inline std::string what_a_spy_reads(int fd, int ms) {
  std::string seen;
  char buf[512];
  for (int waited = 0; waited < ms; waited += 20) {
    const ssize_t got = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (got > 0) seen.append(buf, static_cast<std::size_t>(got));
    if (got == 0) break;
    ::usleep(20 * 1000);
  }
  return seen;
}

}  // namespace gpudiag::test
