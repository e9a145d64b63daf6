#include <gtest/gtest.h>

#include "healthcheck/checks/check_ib.h"

using namespace gpudiag;

namespace {

IbPort port(const std::string& hca, const char* state, const char* phys, const char* rate, const char* ll) {
  IbPort p;
  p.hca = hca;
  p.number = 1;
  p.state = parse_port_state(state, "/state");
  p.phys_state = parse_port_state(phys, "/phys_state");
  p.rate_gbps = parse_rate_gbps(rate, "/rate");
  p.rate_text = rate;
  p.link_layer = parse_link_layer(ll, "/link_layer");
  return p;
}

IbInventory inventory(int n) {
  IbInventory inv;
  inv.class_present = true;
  for (int i = 0; i < n; ++i) {
    IbHca h;
    h.name = "mlx5_" + std::to_string(i);
    h.ports.push_back(port(h.name, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand"));
    inv.hcas.push_back(h);
  }
  IbHca bond;
  bond.name = "mlx5_bond_0";
  bond.ports.push_back(port(bond.name, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (2X HDR)", "Ethernet"));
  inv.hcas.push_back(bond);
  return inv;
}

IbExpect ndr8() {
  IbExpect e;
  e.hcas = {"mlx5_[0-7]"};
  e.count = 8;
  e.rate_gbps = 400;
  e.link_layer = "InfiniBand";
  e.exclude = {"mlx5_bond_*"};
  return e;
}

const Finding* first_bad(const CheckResult& r) { return r.most_severe(); }

}  // namespace

TEST(IbCheck, HealthyIsOk) {
  auto r = evaluate_ib(inventory(8), ndr8());
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary, "8 HCAs, 8 ports up");
}

TEST(IbCheck, NoConfigFlagsOnlyWhatIsBroken) {
  auto inv = inventory(8);
  EXPECT_EQ(evaluate_ib(inv, {}).status, Status::ok);
  inv.hcas[3].ports[0] = port("mlx5_3", "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand");
  auto r = evaluate_ib(inv, {});
  EXPECT_EQ(r.status, Status::critical);
  ASSERT_TRUE(first_bad(r));
  EXPECT_EQ(first_bad(r)->subject, "mlx5_3:1");
  EXPECT_EQ(first_bad(r)->message, "mlx5_3 port 1 is DOWN (phys_state Polling)");
  EXPECT_NE(first_bad(r)->hint.find("cable"), std::string::npos);
}

TEST(IbCheck, DownPortDoesNotAlsoComplainAboutRate) {
  auto inv = inventory(8);
  inv.hcas[3].ports[0] = port("mlx5_3", "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand");
  auto r = evaluate_ib(inv, ndr8());
  EXPECT_EQ(r.count(Status::critical), 1);
}

TEST(IbCheck, InitWithLinkUpPointsAtTheSubnetManager) {
  auto inv = inventory(8);
  inv.hcas[0].ports[0] = port("mlx5_0", "2: INIT", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand");
  auto r = evaluate_ib(inv, ndr8());
  ASSERT_TRUE(first_bad(r));
  EXPECT_NE(first_bad(r)->hint.find("subnet manager"), std::string::npos);
}

TEST(IbCheck, SlowRate) {
  auto inv = inventory(8);
  inv.hcas[5].ports[0] = port("mlx5_5", "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand");
  auto r = evaluate_ib(inv, ndr8());
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_EQ(first_bad(r)->subject, "mlx5_5:1");
  EXPECT_NE(first_bad(r)->message.find("200 Gb/sec (4X HDR) where 400 Gb/sec is expected"), std::string::npos);
}

TEST(IbCheck, EthernetWhereInfiniBandExpected) {
  auto inv = inventory(8);
  inv.hcas[6].ports[0] = port("mlx5_6", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "Ethernet");
  auto r = evaluate_ib(inv, ndr8());
  EXPECT_EQ(first_bad(r)->subject, "mlx5_6:1");
  EXPECT_NE(first_bad(r)->hint.find("mlxconfig -d mlx5_6 set LINK_TYPE_P1=1"), std::string::npos);
}

TEST(IbCheck, MissingExactHcaIsNamed) {
  IbExpect e = ndr8();
  e.hcas = {"mlx5_0", "mlx5_1", "mlx5_9"};
  e.count.reset();
  auto r = evaluate_ib(inventory(8), e);
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_EQ(first_bad(r)->subject, "mlx5_9");
  EXPECT_NE(first_bad(r)->message.find("missing"), std::string::npos);
}

TEST(IbCheck, TooFewHcasForPattern) {
  auto r = evaluate_ib(inventory(7), ndr8());
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_NE(first_bad(r)->message.find("7 HCAs found where 8 are expected"), std::string::npos);
}

TEST(IbCheck, NoIbClassWithExpectations) {
  IbInventory none;
  EXPECT_EQ(evaluate_ib(none, {}).status, Status::ok);
  auto r = evaluate_ib(none, ndr8());
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_NE(first_bad(r)->message.find("/sys/class/infiniband"), std::string::npos);
}

TEST(IbCheck, UnreadableAttributeIsUnknownAndNamesFile) {
  auto inv = inventory(8);
  inv.hcas[2].ports[0].state = Result<PortState>::failure("/sys/class/infiniband/mlx5_2/ports/1/state: file is empty");
  auto r = evaluate_ib(inv, ndr8());
  EXPECT_EQ(r.status, Status::unknown);
  EXPECT_EQ(first_bad(r)->subject, "mlx5_2:1");
  EXPECT_NE(first_bad(r)->message.find("/sys/class/infiniband/mlx5_2/ports/1/state: file is empty"), std::string::npos);
}

TEST(IbCheck, HcaThatVerbsCannotOpenIsCritical) {
  std::vector<std::string> verbs = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_7"};
  auto r = evaluate_ib(inventory(8), ndr8(), verbs);
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_EQ(first_bad(r)->subject, "mlx5_6");
  EXPECT_NE(first_bad(r)->hint.find("ib_uverbs"), std::string::npos);
  verbs.push_back("mlx5_6");
  EXPECT_EQ(evaluate_ib(inventory(8), ndr8(), verbs).status, Status::ok);
}

// Without ib.rate_gbps, one port slower than the ports of identical HCAs is wrong on
// its face: a warning that names both rates.
TEST(IbCheck, PortSlowerThanIdenticalSiblingsWarnsWithoutConfig) {
  auto inv = inventory(8);
  for (auto& h : inv.hcas) h.model = "MT4129";
  inv.hcas[5].ports[0] = port("mlx5_5", "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand");
  auto r = evaluate_ib(inv, {});
  EXPECT_EQ(r.status, Status::warning);
  ASSERT_EQ(r.count(Status::warning), 1);
  EXPECT_EQ(first_bad(r)->subject, "mlx5_5:1");
  EXPECT_EQ(first_bad(r)->message,
            "mlx5_5 port 1 runs at 200 Gb/sec (4X HDR) where its identical siblings (MT4129 InfiniBand) run at "
            "400 Gb/sec (4X NDR)");
  EXPECT_NE(first_bad(r)->hint.find("cable"), std::string::npos);
  // The bond (Ethernet, 100 Gb/s) is no sibling of the InfiniBand ports.
  EXPECT_EQ(r.summary, "9 HCAs, 1 of 9 ports bad");

  // A configured rate is the site's word: the critical finding, not the sibling warning.
  auto with_rate = evaluate_ib(inv, ndr8());
  EXPECT_EQ(with_rate.status, Status::critical);
  EXPECT_EQ(with_rate.count(Status::warning), 0);

  // A different model, or one that could not be read, is no sibling.
  inv.hcas[5].model = "MT4123";
  EXPECT_EQ(evaluate_ib(inv, {}).status, Status::ok);
  inv.hcas[5].model = "";
  EXPECT_EQ(evaluate_ib(inv, {}).status, Status::ok);
}

TEST(IbCheck, DownSiblingSetsNoRate) {
  auto inv = inventory(2);
  for (auto& h : inv.hcas) h.model = "MT4129";
  inv.hcas[0].ports[0] = port("mlx5_0", "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand");
  auto r = evaluate_ib(inv, {});
  EXPECT_EQ(r.count(Status::critical), 1);
  EXPECT_EQ(r.count(Status::warning), 0);
}

// EFA: the link layer its driver always reports is "Unknown"; that is a value, not an
// unreadable file, and the fixes name EFA's tools.
TEST(IbCheck, EfaUnknownLinkLayerIsNotUnknown) {
  IbInventory inv;
  inv.class_present = true;
  for (int i = 0; i < 4; ++i) {
    IbHca h;
    h.name = "rdmap" + std::to_string(20 + i) + "s0";
    h.driver = "efa";
    h.pci_id = "1d0f:efa1";
    h.ports.push_back(port(h.name, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Unknown"));
    inv.hcas.push_back(h);
  }
  auto r = evaluate_ib(inv, IbExpect{});
  EXPECT_EQ(r.status, Status::ok) << (r.most_severe() ? r.most_severe()->message : "");
  inv.hcas[1].ports[0] = port(inv.hcas[1].name, "4: ACTIVE", "5: LinkUp", "25 Gb/sec (1X EDR)", "Unknown");
  r = evaluate_ib(inv, IbExpect{});
  ASSERT_EQ(r.status, Status::warning);
  EXPECT_EQ(r.most_severe()->message,
            "rdmap21s0 port 1 runs at 25 Gb/sec (1X EDR) where its identical siblings (1d0f:efa1 Unknown) run at "
            "100 Gb/sec (4X EDR)");
  EXPECT_NE(r.most_severe()->hint.find("ibv_devinfo -d rdmap21s0"), std::string::npos);
  EXPECT_EQ(r.most_severe()->hint.find("mlx"), std::string::npos);
}

// The sibling rule compares ports of one role: a storage port at NDR200 on the same card
// model is no sibling of the compute ports at NDR400.
TEST(IbCheck, SiblingsAreOfOneRole) {
  IbInventory inv = inventory(3);
  inv.hcas.pop_back();  // the bond
  for (auto& h : inv.hcas) h.model = "MT4129";
  inv.hcas[2].ports[0] = port("mlx5_2", "4: ACTIVE", "5: LinkUp", "200 Gb/sec (2X NDR)", "InfiniBand");
  EXPECT_EQ(evaluate_ib(inv, IbExpect{}).status, Status::warning);
  PortRoles roles;
  roles["mlx5_2:1"] = {PortRole::storage, "test", false};
  auto r = evaluate_ib(inv, IbExpect{}, std::nullopt, &roles);
  EXPECT_EQ(r.status, Status::ok);
  // Per-role expectations: the fabric's floor does not apply to storage, storage's does.
  IbExpect e;
  e.rate_gbps = 400;
  e.storage.rate_gbps = 400;
  r = evaluate_ib(inv, e, std::nullopt, &roles);
  ASSERT_EQ(r.status, Status::critical);
  EXPECT_EQ(r.most_severe()->message, "mlx5_2 port 1 (storage) runs at 200 Gb/sec (2X NDR) where 400 Gb/sec is expected");
  // An unused port is never expected up.
  inv.hcas[2].ports[0] = port("mlx5_2", "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand");
  roles["mlx5_2:1"] = {PortRole::unused, "test", false};
  r = evaluate_ib(inv, e, std::nullopt, &roles);
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary, "3 HCAs, 2 ports up, 1 unused");  // the HCA is still there; its port is not judged
}
