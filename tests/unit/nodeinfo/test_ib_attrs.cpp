#include <gtest/gtest.h>

#include <set>

#include "nodeinfo/active_ib_host.h"
#include "nodeinfo/ib_attrs.h"
#include "util/this_host.h"

using namespace gpudiag;

TEST(PortState, ParsesKernelText) {
  auto s = parse_port_state("4: ACTIVE\n", "/state");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->code, 4);
  EXPECT_EQ(s->name, "ACTIVE");
  auto p = parse_port_state("2: Polling\n", "/phys_state");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->code, 2);
  EXPECT_EQ(p->name, "Polling");
}

TEST(PortState, RejectsGarbage) {
  EXPECT_FALSE(parse_port_state("ACTIVE", "/s"));
  EXPECT_FALSE(parse_port_state("x: ACTIVE", "/s"));
  EXPECT_FALSE(parse_port_state("99: WHAT", "/s"));
  EXPECT_FALSE(parse_port_state("", "/s"));
}

TEST(Rate, ParsesWholeAndFractional) {
  EXPECT_DOUBLE_EQ(*parse_rate_gbps("400 Gb/sec (4X NDR)\n", "/r"), 400.0);
  EXPECT_DOUBLE_EQ(*parse_rate_gbps("2.5 Gb/sec (1X SDR)", "/r"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_rate_gbps("56.25 Gb/sec (4X FDR)", "/r"), 56.25);
}

TEST(Rate, RejectsGarbage) {
  EXPECT_FALSE(parse_rate_gbps("fast", "/r"));
  EXPECT_FALSE(parse_rate_gbps("400 Mb/sec", "/r"));
  EXPECT_FALSE(parse_rate_gbps("-5 Gb/sec", "/r"));
}

TEST(LinkLayer, OnlyTheTwoKernelValues) {
  EXPECT_EQ(*parse_link_layer("InfiniBand\n", "/l"), "InfiniBand");
  EXPECT_EQ(*parse_link_layer("Ethernet\n", "/l"), "Ethernet");
  auto bad = parse_link_layer("Omni-Path", "/l");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("Omni-Path"), std::string::npos);
}

// The nccl-log command asks whether this host could have used IB (nodeinfo/active_ib_host.h).
TEST(ActiveIbHost, NamesThisHostOnlyWithAnActivePort) {
  auto names = local_hosts_with_active_ib(std::string(GPUDIAG_FIXTURES_DIR) + "/healthy");
  EXPECT_EQ(names, (std::set<std::string>{hostname(), short_name(hostname())}));
  EXPECT_TRUE(local_hosts_with_active_ib(std::string(GPUDIAG_FIXTURES_DIR) + "/no-such-fixture").empty());
}
