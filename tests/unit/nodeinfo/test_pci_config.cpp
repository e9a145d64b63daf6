#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "nodeinfo/pci_config.h"
#include "nodeinfo/pci_devices.h"

using namespace gpudiag;

namespace {

void put16(std::string& c, std::size_t off, std::uint16_t v) {
  c[off] = static_cast<char>(v & 0xff);
  c[off + 1] = static_cast<char>(v >> 8);
}
void put32(std::string& c, std::size_t off, std::uint32_t v) {
  put16(c, off, v & 0xffff);
  put16(c, off + 2, v >> 16);
}
std::uint32_t ecap(std::uint16_t id, unsigned next) { return id | (1u << 16) | (next << 20); }

// A 4 KiB config space of a switch downstream port: PCIe cap at 0x40, AER at 0x100,
// ACS at 0x148.
std::string downstream_port(std::uint16_t acs_ctrl) {
  std::string c(4096, '\0');
  c[0x34] = 0x40;
  c[0x40] = 0x10;
  put16(c, 0x42, 0x0002 | (0x6 << 4));
  put32(c, 0x100, ecap(0x0001, 0x148));
  put32(c, 0x148, ecap(0x000d, 0));
  put16(c, 0x14c, 0x005f);
  put16(c, 0x14e, acs_ctrl);
  return c;
}

}  // namespace

TEST(Acs, FindsCapabilityAfterAnother) {
  auto r = find_acs(downstream_port(0x000d));
  ASSERT_EQ(r.kind, AcsLookup::Kind::found);
  EXPECT_EQ(r.offset, 0x148);
  EXPECT_EQ(r.cap, 0x005f);
  EXPECT_EQ(r.ctrl, 0x000d);
  EXPECT_EQ(acs_bit_names(r.ctrl & kAcsRedirectBits), "ReqRedir|CmpltRedir");
  EXPECT_EQ(acs_bit_names(r.ctrl), "SrcValid|ReqRedir|CmpltRedir");
  EXPECT_EQ(acs_bit_names(0), "none");
}

TEST(Acs, NonRootViewIsTruncated) {
  EXPECT_EQ(find_acs(downstream_port(0).substr(0, 64)).kind, AcsLookup::Kind::truncated);
  EXPECT_EQ(find_acs("").kind, AcsLookup::Kind::truncated);
}

TEST(Acs, ConventionalSpaceHasNoAcs) {
  EXPECT_EQ(find_acs(downstream_port(0).substr(0, 256)).kind, AcsLookup::Kind::absent);
}

TEST(Acs, LoopIsMalformedNotInfinite) {
  std::string c = downstream_port(0);
  put32(c, 0x100, ecap(0x0001, 0x100));
  auto r = find_acs(c);
  EXPECT_EQ(r.kind, AcsLookup::Kind::malformed);
  EXPECT_NE(r.detail.find("loops"), std::string::npos);
  // A longer cycle through two capabilities.
  put32(c, 0x100, ecap(0x0001, 0x200));
  put32(c, 0x200, ecap(0x0002, 0x100));
  EXPECT_EQ(find_acs(c).kind, AcsLookup::Kind::malformed);
}

TEST(Acs, PointerOutsideSpaceIsMalformed) {
  std::string c = downstream_port(0);
  put32(c, 0x100, ecap(0x0001, 0x050));
  EXPECT_EQ(find_acs(c).kind, AcsLookup::Kind::malformed);
  put32(c, 0x100, ecap(0x0001, 0x101));
  EXPECT_EQ(find_acs(c).kind, AcsLookup::Kind::malformed);
  // ACS header in the last dword: its registers would lie past the end.
  put32(c, 0x100, ecap(0x0001, 0xffc));
  put32(c, 0xffc, ecap(0x000d, 0));
  EXPECT_EQ(find_acs(c).kind, AcsLookup::Kind::malformed);
}

TEST(Acs, AllOnesMeansNoDevice) {
  std::string c(4096, '\xff');
  EXPECT_EQ(find_acs(c).kind, AcsLookup::Kind::absent);
}

TEST(PortType, ReadsPcieCapability) {
  EXPECT_EQ(pcie_port_type(downstream_port(0)), PciePortType::switch_downstream);
  EXPECT_EQ(pcie_port_type(std::string(64, '\0')), std::nullopt);
  std::string loop = downstream_port(0);
  loop[0x40] = 0x01;  // not PCIe
  loop[0x41] = 0x40;  // points at itself
  EXPECT_EQ(pcie_port_type(loop), std::nullopt);
}

TEST(PciPath, BridgesNearestFirst) {
  auto b = bridges_from_path("/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/0000:13:00.0");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], "0000:12:00.0");
  EXPECT_EQ(b[2], "0000:10:01.0");
  EXPECT_TRUE(bridges_from_path("/sys/devices/pci0000:00/0000:00:02.0").empty());
}

TEST(PciPath, BdfShape) {
  EXPECT_TRUE(is_bdf("0000:3a:00.0"));
  EXPECT_FALSE(is_bdf("pci0000:3a"));
  EXPECT_FALSE(is_bdf("0000:3a:00.8"));
  EXPECT_FALSE(is_bdf("0000:3g:00.0"));
}
