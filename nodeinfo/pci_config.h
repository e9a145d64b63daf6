#pragma once
// Pure decoding of PCI configuration space as read from /sys/bus/pci/devices/*/config:
// the PCI Express port type and the ACS extended capability (ARCHITECTURE §6).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag {

enum class PciePortType : int {
  endpoint = 0x0,
  legacy_endpoint = 0x1,
  root_port = 0x4,
  switch_upstream = 0x5,
  switch_downstream = 0x6,
  pcie_to_pci_bridge = 0x7,
  pci_to_pcie_bridge = 0x8,
  rc_integrated_endpoint = 0x9,
  rc_event_collector = 0xa,
};
std::string port_type_name(PciePortType t);

// ACS control register bits.
constexpr std::uint16_t kAcsSrcValid = 0x01, kAcsTransBlk = 0x02, kAcsReqRedir = 0x04,
                        kAcsCmpltRedir = 0x08, kAcsUpstreamFwd = 0x10, kAcsEgressCtrl = 0x20,
                        kAcsDirectTrans = 0x40;
// The bits that send peer-to-peer traffic up to the root complex.
constexpr std::uint16_t kAcsRedirectBits = kAcsReqRedir | kAcsCmpltRedir;
// "SrcValid|ReqRedir|CmpltRedir", or "none".
std::string acs_bit_names(std::uint16_t ctrl);

// The port type from the PCI Express capability, or nullopt when the standard
// capability list has none or cannot be read.
std::optional<PciePortType> pcie_port_type(std::string_view config);

struct AcsLookup {
  enum class Kind {
    found,      // ACS capability present; cap and ctrl are set
    absent,     // the device has no ACS capability (or no extended config space)
    truncated,  // only the first 64 bytes were readable: the reader is not root
    malformed,  // the extended capability list loops or points outside the space
  };
  Kind kind = Kind::absent;
  std::uint16_t offset = 0;
  std::uint16_t cap = 0;
  std::uint16_t ctrl = 0;
  std::string detail;  // why, for malformed
};
AcsLookup find_acs(std::string_view config);

}  // namespace gpudiag
