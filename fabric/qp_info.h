#pragma once
// What two nodes must tell each other to connect an RDMA RC queue pair (issue 32), carried
// through srun's coordinator on the step's token-checked connections. The line comes from
// another node's task, so it is outside input: bounded, every field checked, fuzzed
// (fuzz_qp_info). Pure.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag::fabric {

struct QpInfo {
  std::string hca;           // the device name, for the report: one printable word
  std::uint8_t port = 1;     // the HCA's port
  std::uint16_t lid = 0;     // InfiniBand: the port's LID (0 on RoCE)
  std::uint32_t qpn = 0;     // 24 bits
  std::uint32_t psn = 0;     // 24 bits
  std::array<std::uint8_t, 16> gid{};  // RoCE, or IB across subnets
  int gid_index = -1;        // -1: no GRH (IB within a subnet)
  std::uint8_t mtu = 3;      // enum ibv_mtu: 1..5 (256..4096 bytes)
  std::uint32_t rkey = 0;    // the buffer the peer may write into
  std::uint64_t addr = 0;
  std::uint32_t length = 0;  // its size in bytes
  bool operator==(const QpInfo&) const = default;
};

// "HCA PORT LID QPN PSN GID GIDINDEX MTU RKEY ADDR LENGTH", numbers in decimal, the GID
// as 32 hex digits.
std::string format_qp_info(const QpInfo& q);
std::optional<QpInfo> parse_qp_info(const std::string& text);

}  // namespace gpudiag::fabric
