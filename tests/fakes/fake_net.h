#pragma once
// What the fakes that carry bytes between the test cluster's nodes share (fake_ibverbs,
// fake_nccl): the node's own address, the first IPv4 one that is not loopback (in a
// namespace node: its eth0), so that their traffic stays between the cluster's nodes.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>

namespace fake {

// FAKE_NODE_ADDR overrides; loopback when the node has nothing else.
inline in_addr node_ipv4() {
  in_addr out{};
  out.s_addr = htonl(INADDR_LOOPBACK);
  const char* forced = std::getenv("FAKE_NODE_ADDR");
  if (forced && ::inet_pton(AF_INET, forced, &out) == 1) return out;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return out;
  for (ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(a.s_addr) >> 24) == 127) continue;
    out = a;
    break;
  }
  ::freeifaddrs(all);
  return out;
}

}  // namespace fake
