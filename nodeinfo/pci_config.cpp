#include "nodeinfo/pci_config.h"

#include <bitset>
#include <cstdio>

namespace gpudiag {
namespace {

constexpr std::size_t kPublicConfigBytes = 64;  // what the kernel shows non-root readers
constexpr std::size_t kExtendedStart = 0x100;
constexpr std::uint16_t kEcapAcs = 0x000D;
constexpr std::uint8_t kCapPcie = 0x10;

std::uint16_t u16_at(std::string_view b, std::size_t off) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(b[off]) |
                                    (static_cast<unsigned char>(b[off + 1]) << 8));
}
std::uint32_t u32_at(std::string_view b, std::size_t off) {
  return u16_at(b, off) | (static_cast<std::uint32_t>(u16_at(b, off + 2)) << 16);
}
std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%03x", v);
  return buf;
}

}  // namespace

std::string port_type_name(PciePortType t) {
  switch (t) {
    case PciePortType::endpoint: return "endpoint";
    case PciePortType::legacy_endpoint: return "legacy endpoint";
    case PciePortType::root_port: return "root port";
    case PciePortType::switch_upstream: return "switch upstream port";
    case PciePortType::switch_downstream: return "switch downstream port";
    case PciePortType::pcie_to_pci_bridge: return "PCIe-to-PCI bridge";
    case PciePortType::pci_to_pcie_bridge: return "PCI-to-PCIe bridge";
    case PciePortType::rc_integrated_endpoint: return "root complex integrated endpoint";
    case PciePortType::rc_event_collector: return "root complex event collector";
  }
  return "port type " + std::to_string(static_cast<int>(t));
}

std::string acs_bit_names(std::uint16_t ctrl) {
  static const std::pair<std::uint16_t, const char*> kBits[] = {
      {kAcsSrcValid, "SrcValid"},     {kAcsTransBlk, "TransBlk"},     {kAcsReqRedir, "ReqRedir"},
      {kAcsCmpltRedir, "CmpltRedir"}, {kAcsUpstreamFwd, "UpstreamFwd"}, {kAcsEgressCtrl, "EgressCtrl"},
      {kAcsDirectTrans, "DirectTrans"}};
  std::string out;
  for (auto [bit, name] : kBits) {
    if (!(ctrl & bit)) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out.empty() ? "none" : out;
}

std::optional<PciePortType> pcie_port_type(std::string_view config) {
  if (config.size() < kPublicConfigBytes) return std::nullopt;
  std::size_t ptr = static_cast<unsigned char>(config[0x34]) & 0xfc;
  // 48 is the most capabilities that fit in the 192 bytes after the header; more
  // steps than that means the list loops.
  for (int steps = 0; ptr >= 0x40 && steps < 48; ++steps) {
    if (ptr + 4 > config.size()) return std::nullopt;
    if (static_cast<unsigned char>(config[ptr]) == kCapPcie) {
      int type = (u16_at(config, ptr + 2) >> 4) & 0xf;
      return static_cast<PciePortType>(type);
    }
    ptr = static_cast<unsigned char>(config[ptr + 1]) & 0xfc;
  }
  return std::nullopt;
}

AcsLookup find_acs(std::string_view config) {
  AcsLookup r;
  if (config.size() <= kPublicConfigBytes) {
    r.kind = AcsLookup::Kind::truncated;
    return r;
  }
  if (config.size() < kExtendedStart + 4) return r;  // conventional PCI: no extended space

  std::bitset<4096 / 4> seen;
  std::size_t off = kExtendedStart;
  while (true) {
    std::uint32_t header = u32_at(config, off);
    if (header == 0 || header == 0xffffffffu) return r;
    seen.set(off / 4);
    if ((header & 0xffff) == kEcapAcs) {
      if (off + 8 > config.size()) {
        r.kind = AcsLookup::Kind::malformed;
        r.detail = "ACS capability at " + hex(off) + " runs past the end of config space";
        return r;
      }
      r.kind = AcsLookup::Kind::found;
      r.offset = static_cast<std::uint16_t>(off);
      r.cap = u16_at(config, off + 4);
      r.ctrl = u16_at(config, off + 6);
      return r;
    }
    std::size_t next = header >> 20;
    if (next == 0) return r;
    if (next < kExtendedStart || (next & 3) || next + 4 > config.size()) {
      r.kind = AcsLookup::Kind::malformed;
      r.detail = "extended capability at " + hex(off) + " points to " + hex(next) + ", outside config space";
      return r;
    }
    if (seen.test(next / 4)) {
      r.kind = AcsLookup::Kind::malformed;
      r.detail = "extended capability list loops at " + hex(next);
      return r;
    }
    off = next;
  }
}

}  // namespace gpudiag
