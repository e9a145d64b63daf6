#include <gtest/gtest.h>

#include "healthcheck/checks/check_pcie.h"

using namespace gpudiag;

namespace {

PcieLink mk_link(const char* speed, const char* width, const char* max_speed = "32.0 GT/s PCIe",
              const char* max_width = "16") {
  PcieLink l;
  l.speed = parse_link_speed_gts(speed, "/current_link_speed");
  l.width = parse_link_width(width, "/current_link_width");
  l.max_speed = parse_link_speed_gts(max_speed, "/max_link_speed");
  l.max_width = parse_link_width(max_width, "/max_link_width");
  return l;
}

PcieDevice gpu(const std::string& bdf, PcieLink l = mk_link("32.0 GT/s PCIe", "16")) {
  PcieDevice d;
  d.kind = PcieDevice::Kind::gpu;
  d.bdf = bdf;
  d.label = "GPU " + bdf;
  d.model = "10de:2335";
  d.link = l;
  return d;
}

PcieDevice nic(const std::string& hca, const std::string& bdf, PcieLink l = mk_link("32.0 GT/s PCIe", "16")) {
  PcieDevice d;
  d.kind = PcieDevice::Kind::nic;
  d.bdf = bdf;
  d.hca = hca;
  d.label = "NIC " + hca + " (" + bdf + ")";
  d.model = "15b3:1021";
  d.link = l;
  return d;
}

PcieDevice bridge(const std::string& bdf, std::vector<std::string> feeds, std::vector<std::string> below,
                  std::vector<std::string> above, PcieLink l = mk_link("32.0 GT/s PCIe", "16")) {
  PcieDevice d;
  d.kind = PcieDevice::Kind::bridge;
  d.bdf = bdf;
  d.label = "bridge " + bdf;
  d.feeds = std::move(feeds);
  d.below = std::move(below);
  d.above = std::move(above);
  d.link = l;
  return d;
}

// One switch: root port 10:01.0, upstream port 11:00.0, downstream ports 12:00.0 and
// 12:01.0 above GPU 13:00.0 and NIC mlx5_0 at 14:00.0, plus a second GPU elsewhere.
PcieFacts node() {
  PcieFacts f;
  f.devices = {gpu("0000:13:00.0"), gpu("0000:33:00.0"), nic("mlx5_0", "0000:14:00.0"),
               bridge("0000:12:00.0", {"GPU 0000:13:00.0"}, {"0000:13:00.0"}, {"0000:11:00.0"}),
               bridge("0000:11:00.0", {"GPU 0000:13:00.0", "NIC mlx5_0 (0000:14:00.0)"},
                      {"0000:12:00.0", "0000:12:01.0"}, {"0000:10:01.0"}),
               bridge("0000:10:01.0", {"GPU 0000:13:00.0", "NIC mlx5_0 (0000:14:00.0)"}, {"0000:11:00.0"}, {}),
               bridge("0000:12:01.0", {"NIC mlx5_0 (0000:14:00.0)"}, {"0000:14:00.0"}, {"0000:11:00.0"})};
  f.devices[0].above = {"0000:12:00.0"};
  f.devices[2].above = {"0000:12:01.0"};
  return f;
}

PcieDevice& find(PcieFacts& f, const std::string& bdf) {
  for (auto& d : f.devices)
    if (d.bdf == bdf) return d;
  throw std::runtime_error("no " + bdf);
}

}  // namespace

TEST(PcieLinks, SpeedsAsKernelsWriteThem) {
  EXPECT_DOUBLE_EQ(*parse_link_speed_gts("16.0 GT/s PCIe\n", "x"), 16.0);
  EXPECT_DOUBLE_EQ(*parse_link_speed_gts("8 GT/s\n", "x"), 8.0);
  EXPECT_DOUBLE_EQ(*parse_link_speed_gts("2.5 GT/s PCIe\n", "x"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_link_speed_gts("32.0 GT/s PCIe", "x"), 32.0);
  auto unknown = parse_link_speed_gts("Unknown\n", "/sys/x/current_link_speed");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("/sys/x/current_link_speed"), std::string::npos);
  EXPECT_NE(unknown.error().find("Unknown"), std::string::npos);
  for (const char* bad : {"", "\n", "16.0", "16.0 Gb/s", "GT/s", "-8 GT/s", "16.0 GT/s PCIe extra", "nan GT/s",
                          "\x01\x02"})
    EXPECT_FALSE(parse_link_speed_gts(bad, "x")) << bad;
}

TEST(PcieLinks, WidthsPcieDefines) {
  EXPECT_EQ(*parse_link_width("16\n", "x"), 16);
  EXPECT_EQ(*parse_link_width("1", "x"), 1);
  for (const char* bad : {"0", "3", "x16", "", "16 lanes", "-16", "\xff\xfe"}) EXPECT_FALSE(parse_link_width(bad, "x")) << bad;
  EXPECT_NE(parse_link_width("0\n", "w").error().find("link is down"), std::string::npos);
}

TEST(PcieCheck, HealthyIsOkWithMetrics) {
  auto r = evaluate_pcie(node(), {});
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary, "3 GPUs and NICs, 4 bridges, no link below its capability");
  ASSERT_EQ(r.metrics.size(), 14u);
  EXPECT_EQ(r.metrics[0].name, "gpudiag_pcie_link_width");
  EXPECT_EQ(r.metrics[0].labels, (std::vector<std::pair<std::string, std::string>>{{"bdf", "0000:13:00.0"},
                                                                                  {"device", "gpu"}}));
  EXPECT_EQ(r.metrics[0].value, 16);
  EXPECT_EQ(r.metrics[5].name, "gpudiag_pcie_link_speed_gts");
  EXPECT_EQ(r.metrics[5].labels[1].second, "mlx5_0");
  EXPECT_EQ(r.metrics[5].value, 32);
}

TEST(PcieCheck, GpuAtX8IsCriticalAndNamesBothValuesAndTheFix) {
  auto f = node();
  find(f, "0000:13:00.0").link = mk_link("16.0 GT/s PCIe", "8");
  // The switch port above sees the same link from its end: one finding, not two.
  find(f, "0000:12:00.0").link = mk_link("16.0 GT/s PCIe", "8");
  auto r = evaluate_pcie(f, {});
  EXPECT_EQ(r.status, Status::critical);
  ASSERT_EQ(r.count(Status::critical), 1);
  const Finding* bad = r.most_severe();
  EXPECT_EQ(bad->subject, "0000:13:00.0");
  EXPECT_EQ(bad->message, "GPU 0000:13:00.0 runs at x8 at 16.0 GT/s, capable of x16 at 32.0 GT/s");
  EXPECT_NE(bad->hint.find("reseat the GPU"), std::string::npos);
  EXPECT_NE(bad->hint.find("riser"), std::string::npos);
  EXPECT_NE(bad->hint.find("AER"), std::string::npos);
  EXPECT_EQ(r.summary, "3 GPUs and NICs, 4 bridges: 1 link below its capability");
}

TEST(PcieCheck, NicAtGen3NamesTheHca) {
  auto f = node();
  find(f, "0000:14:00.0").link = mk_link("8.0 GT/s PCIe", "16");
  auto r = evaluate_pcie(f, {});
  ASSERT_EQ(r.count(Status::critical), 1);
  EXPECT_EQ(r.most_severe()->message,
            "NIC mlx5_0 (0000:14:00.0) runs at x16 at 8.0 GT/s, capable of x16 at 32.0 GT/s");
  EXPECT_NE(r.most_severe()->hint.find("reseat the NIC"), std::string::npos);
}

TEST(PcieCheck, PolicyDecidesWhatDowntrainingIs) {
  auto f = node();
  find(f, "0000:13:00.0").link = mk_link("32.0 GT/s PCIe", "8");
  PcieSettings s;
  s.policy = Policy::warning;
  EXPECT_EQ(evaluate_pcie(f, s).status, Status::warning);
  s.policy = Policy::ignore;
  EXPECT_EQ(evaluate_pcie(f, s).status, Status::ok);
}

TEST(PcieCheck, DowntrainedSwitchUplinkNamesWhatItFeeds) {
  auto f = node();
  find(f, "0000:11:00.0").link = mk_link("32.0 GT/s PCIe", "4");
  find(f, "0000:10:01.0").link = mk_link("32.0 GT/s PCIe", "4");
  auto r = evaluate_pcie(f, {});
  ASSERT_EQ(r.count(Status::critical), 1) << r.findings.size();
  EXPECT_EQ(r.most_severe()->subject, "0000:11:00.0");
  EXPECT_EQ(r.most_severe()->message,
            "bridge 0000:11:00.0 (above GPU 0000:13:00.0, NIC mlx5_0 (0000:14:00.0)) runs at x4 at 32.0 GT/s, "
            "capable of x16 at 32.0 GT/s");
}

TEST(PcieCheck, BridgeAboveALessCapableDeviceIsFine) {
  // A Gen4 NIC under a Gen5 switch port: both ends at Gen4 is all the link can do.
  auto f = node();
  find(f, "0000:14:00.0").link = mk_link("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16");
  find(f, "0000:12:01.0").link = mk_link("16.0 GT/s PCIe", "16");
  EXPECT_EQ(evaluate_pcie(f, {}).status, Status::ok);
}

TEST(PcieCheck, FloorsAllowSlotsNarrowByDesign) {
  auto f = node();
  for (const char* bdf : {"0000:13:00.0", "0000:12:00.0"}) find(f, bdf).link = mk_link("32.0 GT/s PCIe", "8");
  PcieSettings s;
  s.gpu_width = 8;
  EXPECT_EQ(evaluate_pcie(f, s).status, Status::ok);
  s.gpu_width = 16;
  auto r = evaluate_pcie(f, s);
  ASSERT_EQ(r.count(Status::critical), 1);
  EXPECT_EQ(r.most_severe()->message,
            "GPU 0000:13:00.0 runs at x8 at 32.0 GT/s, below the x16 at 32.0 GT/s that pcie.gpu_width/gpu_speed "
            "ask for");
  // A NIC speed floor below its maximum accepts Gen4 on a Gen5 card.
  find(f, "0000:13:00.0").link = mk_link("32.0 GT/s PCIe", "16");
  find(f, "0000:12:00.0").link = mk_link("32.0 GT/s PCIe", "16");
  find(f, "0000:14:00.0").link = mk_link("16.0 GT/s PCIe", "16");
  find(f, "0000:12:01.0").link = mk_link("16.0 GT/s PCIe", "16");
  EXPECT_EQ(evaluate_pcie(f, {}).status, Status::critical);
  PcieSettings speed;
  speed.nic_speed = 16;
  EXPECT_EQ(evaluate_pcie(f, speed).status, Status::ok);
}

// NVIDIA GPUs drop to 2.5 GT/s when idle (P8) and a health check runs on idle nodes:
// a GPU's current speed, seen from either end of its link, is not a fault.
TEST(PcieCheck, IdleGpuAtLowSpeedIsFineButItsWidthIsNot) {
  auto f = node();
  find(f, "0000:13:00.0").link = mk_link("2.5 GT/s PCIe", "16");
  find(f, "0000:12:00.0").link = mk_link("2.5 GT/s PCIe", "16");
  auto r = evaluate_pcie(f, {});
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.findings[0].message,
            "GPU 0000:13:00.0 runs at x16 at 2.5 GT/s (an idle GPU lowers its link speed; it can train to 32.0 GT/s)");
  find(f, "0000:13:00.0").link = mk_link("2.5 GT/s PCIe", "8");
  find(f, "0000:12:00.0").link = mk_link("2.5 GT/s PCIe", "8");
  r = evaluate_pcie(f, {});
  ASSERT_EQ(r.count(Status::critical), 1);
  EXPECT_EQ(r.most_severe()->message, "GPU 0000:13:00.0 runs at x8 at 2.5 GT/s, capable of x16 at 32.0 GT/s");
  // Without the GPU's own finding, the switch port names only the width it misses.
  find(f, "0000:13:00.0").link = mk_link("2.5 GT/s PCIe", "16");
  r = evaluate_pcie(f, {});
  ASSERT_EQ(r.count(Status::critical), 1);
  EXPECT_EQ(r.most_severe()->message,
            "bridge 0000:12:00.0 (above GPU 0000:13:00.0) runs at x8 at 2.5 GT/s, capable of x16");
}

// What a GPU's link can train to is judged instead of its speed: the lower of the two
// ends' maximum, against the GPU's own maximum or pcie.gpu_speed.
TEST(PcieCheck, GpuBehindASlowerPortCannotTrainToItsSpeed) {
  auto f = node();
  find(f, "0000:13:00.0").link = mk_link("2.5 GT/s PCIe", "16");
  find(f, "0000:12:00.0").link = mk_link("2.5 GT/s PCIe", "16", "16.0 GT/s PCIe", "16");
  auto r = evaluate_pcie(f, {});
  ASSERT_EQ(r.count(Status::critical), 1);
  EXPECT_EQ(r.most_severe()->subject, "0000:13:00.0");
  EXPECT_EQ(r.most_severe()->message,
            "GPU 0000:13:00.0 cannot train above 16.0 GT/s where 32.0 GT/s is expected: the port above it is "
            "capable of only 16.0 GT/s");
  PcieSettings gen4;
  gen4.gpu_speed = 16;
  EXPECT_EQ(evaluate_pcie(f, gen4).status, Status::ok);
  PcieSettings gen5;
  gen5.gpu_speed = 32;
  find(f, "0000:12:00.0").link = mk_link("2.5 GT/s PCIe", "16");
  find(f, "0000:13:00.0").link = mk_link("2.5 GT/s PCIe", "16", "16.0 GT/s PCIe", "16");
  find(f, "0000:33:00.0").link = mk_link("2.5 GT/s PCIe", "16", "16.0 GT/s PCIe", "16");
  r = evaluate_pcie(f, gen5);
  ASSERT_EQ(r.count(Status::critical), 2);
  EXPECT_EQ(r.most_severe()->message,
            "GPU 0000:13:00.0 cannot train above 16.0 GT/s where 32.0 GT/s is expected (pcie.gpu_speed): it is "
            "capable of only 16.0 GT/s");
}

TEST(PcieCheck, GarbageIsUnknownNeverOk) {
  auto f = node();
  find(f, "0000:33:00.0").link.width = parse_link_width("\x1aW\xaf", "/sys/bus/pci/devices/0000:33:00.0/current_link_width");
  auto r = evaluate_pcie(f, {});
  EXPECT_EQ(r.status, Status::unknown);
  ASSERT_TRUE(r.most_severe());
  EXPECT_EQ(r.most_severe()->subject, "0000:33:00.0");
  EXPECT_NE(r.most_severe()->message.find("cannot read the PCIe link of GPU 0000:33:00.0"), std::string::npos);
  EXPECT_NE(r.most_severe()->message.find("current_link_width"), std::string::npos);
  EXPECT_EQ(r.summary, "3 GPUs and NICs, 4 bridges: 1 unreadable");
  // Its metrics are left out, not written as 0.
  for (const auto& m : r.metrics) {
    if (m.labels[0].second == "0000:33:00.0") {
      EXPECT_NE(m.name, "gpudiag_pcie_link_width");
    }
  }

  auto unknown_speed = node();
  find(unknown_speed, "0000:14:00.0").link.max_speed = parse_link_speed_gts("Unknown", "m");
  EXPECT_EQ(evaluate_pcie(unknown_speed, {}).status, Status::unknown);
}

TEST(PcieCheck, GpuLessCapableThanItsIdenticalSiblingsWarnsWithoutConfig) {
  auto f = node();
  find(f, "0000:33:00.0").link = mk_link("32.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "8");
  auto r = evaluate_pcie(f, {});
  EXPECT_EQ(r.status, Status::warning);
  ASSERT_TRUE(r.most_severe());
  EXPECT_EQ(r.most_severe()->message,
            "GPU 0000:33:00.0 is capable of only x8 at 32.0 GT/s where its identical siblings (10de:2335) are "
            "capable of x16 at 32.0 GT/s");
  // A width floor is the site saying what is expected: the sibling rule steps aside.
  PcieSettings s;
  s.gpu_width = 8;
  EXPECT_EQ(evaluate_pcie(f, s).status, Status::ok);
  // A different model is no sibling.
  find(f, "0000:33:00.0").model = "10de:2330";
  EXPECT_EQ(evaluate_pcie(f, {}).status, Status::ok);
}

TEST(PcieCheck, UnlistablePciIsUnknown) {
  PcieFacts f;
  f.error = "/sys/bus/pci/devices: No such file or directory";
  auto r = evaluate_pcie(f, {});
  EXPECT_EQ(r.status, Status::unknown);
}

// The NIC floors are the GPU fabric's (--baseline reads them there): a front-end card of
// another model that can do only Gen4 is held to what it can do, a Gen5 card at Gen4 is not.
TEST(PcieCheck, NicFloorNeverAsksMoreThanTheCardCanDo) {
  auto f = node();
  PcieSettings s;
  s.nic_speed = 32;
  s.nic_width = 16;
  find(f, "0000:14:00.0").link = mk_link("16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16");
  find(f, "0000:12:01.0").link = mk_link("16.0 GT/s PCIe", "16");
  EXPECT_EQ(evaluate_pcie(f, s).status, Status::ok);
  find(f, "0000:14:00.0").link = mk_link("16.0 GT/s PCIe", "16");
  auto r = evaluate_pcie(f, s);
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_NE(r.most_severe()->message.find("below the x16 at 32.0 GT/s that pcie.nic_width/nic_speed ask for"),
            std::string::npos)
      << r.most_severe()->message;
}
