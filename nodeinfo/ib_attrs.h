#pragma once
// Pure parsers for InfiniBand port attributes in /sys/class/infiniband/<hca>/ports/<n>/.
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

// "4: ACTIVE" -> {4, "ACTIVE"}; "5: LinkUp" -> {5, "LinkUp"}.
struct PortState {
  int code = 0;
  std::string name;
};

// Logical port states (ib_port_state) and physical states (phys_state) as the kernel
// prints them.
constexpr int kPortActive = 4;
constexpr int kPhysLinkUp = 5;

Result<PortState> parse_port_state(std::string_view raw, std::string_view where);
// "400 Gb/sec (4X NDR)" -> 400; "2.5 Gb/sec (1X SDR)" -> 2.5.
Result<double> parse_rate_gbps(std::string_view raw, std::string_view where);
// "InfiniBand", "Ethernet" or "Unknown": the kernel's link_layer_show prints "Unknown" for
// a provider that reports no link layer (EFA's efa_port_link_layer always returns
// IB_LINK_LAYER_UNSPECIFIED). Anything else is garbage.
Result<std::string> parse_link_layer(std::string_view raw, std::string_view where);

}  // namespace gpudiag
