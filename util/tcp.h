#pragma once
// Small TCP helpers over numeric addresses (no name lookup: a resolver can hang), each
// with a deadline. Sockets are non-blocking and close-on-exec.
#include <string>

namespace gpudiag {

// Listens on `addr` ("" for every address, IPv6 and IPv4; IPv4 alone where the kernel has
// no IPv6) and `port` (0: ephemeral).
// Returns the fd, or -1 with `error` set; `bound_port` gets the port.
int tcp_listen(const std::string& addr, int port, int backlog, int& bound_port, std::string& error);

// Connects within `timeout_s`; -1 with `error` set otherwise ("connection refused", "no
// answer in 3 s").
int tcp_connect(const std::string& addr, int port, double timeout_s, std::string& error);

// The local address the kernel would send from to reach `addr` (a UDP connect(), which
// sends nothing); "" when there is no route.
std::string local_addr_towards(const std::string& addr);

// The first IPv4 address of interface `name` (then IPv6); "" when it has none.
std::string interface_addr(const std::string& name);

}  // namespace gpudiag
