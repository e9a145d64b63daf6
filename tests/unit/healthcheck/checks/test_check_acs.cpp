#include <gtest/gtest.h>

#include "healthcheck/checks/check_acs.h"

using namespace gpudiag;

namespace {

void put16(std::string& c, std::size_t off, std::uint16_t v) {
  c[off] = static_cast<char>(v & 0xff);
  c[off + 1] = static_cast<char>(v >> 8);
}

AcsBridge bridge(const std::string& bdf, int port_type, std::uint16_t ctrl) {
  std::string c(4096, '\0');
  c[0x34] = 0x40;
  c[0x40] = 0x10;
  put16(c, 0x42, static_cast<std::uint16_t>(0x0002 | (port_type << 4)));
  put16(c, 0x100, 0x000d);
  put16(c, 0x102, 0x0001);
  put16(c, 0x104, 0x005f);
  put16(c, 0x106, ctrl);
  AcsBridge b;
  b.bdf = bdf;
  b.config = c;
  b.below = {"GPU 0000:33:00.0"};
  return b;
}

}  // namespace

TEST(AcsCheck, RedirectOnSwitchPortFollowsPolicy) {
  std::vector<AcsBridge> bs = {bridge("0000:32:00.0", 6, 0x000d), bridge("0000:30:01.0", 4, 0)};
  auto r = evaluate_acs(bs, 1, 0, Policy::critical);
  EXPECT_EQ(r.status, Status::critical);
  const Finding* f = r.most_severe();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->subject, "0000:32:00.0");
  EXPECT_NE(f->message.find("ReqRedir|CmpltRedir"), std::string::npos);
  EXPECT_NE(f->message.find("GPU 0000:33:00.0"), std::string::npos);
  EXPECT_NE(f->hint.find("setpci -s 0000:32:00.0 ECAP_ACS+0x6.w=0000"), std::string::npos);
  EXPECT_EQ(evaluate_acs(bs, 1, 0, Policy::warning).status, Status::warning);
  EXPECT_EQ(evaluate_acs(bs, 1, 0, Policy::ignore).status, Status::ok);
}

TEST(AcsCheck, RedirectOnRootPortIsOnlyNoted) {
  auto r = evaluate_acs({bridge("0000:30:01.0", 4, 0x001d)}, 1, 0, Policy::critical);
  EXPECT_EQ(r.status, Status::ok);
}

TEST(AcsCheck, TruncatedConfigIsUnknownNeverOk) {
  AcsBridge b = bridge("0000:32:00.0", 6, 0);
  b.config = b.config->substr(0, 64);
  auto r = evaluate_acs({b}, 1, 0, Policy::critical);
  EXPECT_EQ(r.status, Status::unknown);
  EXPECT_NE(r.most_severe()->hint.find("run as root"), std::string::npos);
}

TEST(AcsCheck, UnreadableConfigIsUnknown) {
  AcsBridge b = bridge("0000:32:00.0", 6, 0);
  b.config = Result<std::string>::failure("/sys/bus/pci/devices/0000:32:00.0/config: Permission denied");
  EXPECT_EQ(evaluate_acs({b}, 1, 0, Policy::critical).status, Status::unknown);
}
