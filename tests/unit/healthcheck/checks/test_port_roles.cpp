// Ports by role (healthcheck/checks/port_roles.*): the pure rule on hand-made facts, the PCIe
// distance it stands on, and the roles of the fixture families read through sysfs.
#include <gtest/gtest.h>

#include "healthcheck/checks/port_roles.h"

using namespace gpudiag;

namespace {

RolePort port(const std::string& hca, const std::string& kind, const std::string& layer, std::vector<int> distance,
              bool link = true) {
  RolePort p;
  p.hca = hca;
  p.port = 1;
  p.kind = kind;
  p.link_layer = layer;
  p.link = link;
  p.phys = link ? "LinkUp" : "Polling";
  p.gpu_distance = std::move(distance);
  return p;
}

PortRole role(const PortRoles& r, const std::string& hca) { return role_of(r, hca + ":1").role; }

PciDevice dev(const std::string& bdf, std::vector<std::string> upstream, int numa) {
  PciDevice d;
  d.bdf = bdf;
  d.upstream = std::move(upstream);
  d.numa_node = numa;
  return d;
}

}  // namespace

// DGX H100 with SuperPOD cabling: the compute NICs share a switch with their GPU, the
// storage card (same ConnectX-7 model) sits under a CPU root port.
TEST(PortRoles, StorageCardOfTheSameModelIsNotTheFabric) {
  std::vector<RolePort> ports = {port("mlx5_0", "MT4129", "InfiniBand", {4, kNoPath}),
                                 port("mlx5_3", "MT4129", "InfiniBand", {kNoPath, 4}),
                                 port("mlx5_1", "MT4129", "InfiniBand", {kSameNuma, kNoPath}),
                                 port("mlx5_2", "MT4129", "Ethernet", {kSameNuma, kNoPath})};
  auto r = assign_roles(ports, 2, {});
  EXPECT_EQ(role(r, "mlx5_0"), PortRole::fabric);
  EXPECT_EQ(role(r, "mlx5_3"), PortRole::fabric);
  EXPECT_EQ(role(r, "mlx5_1"), PortRole::storage);
  EXPECT_EQ(role(r, "mlx5_2"), PortRole::frontend);
  EXPECT_EQ(role_of(r, "mlx5_0:1").why, "nearest to a GPU on PCIe");
}

// BasePOD: storage port 1 is not cabled. A compute port down is still the fabric (the
// ib check then says it is down); a storage port with no link partner is unused.
TEST(PortRoles, UncabledNonFabricPortIsUnusedButADownFabricPortIsNot) {
  std::vector<RolePort> ports = {port("mlx5_0", "MT4129", "InfiniBand", {4}, false),
                                 port("mlx5_1", "MT4129", "InfiniBand", {kSameNuma}, false)};
  auto r = assign_roles(ports, 1, {});
  EXPECT_EQ(role(r, "mlx5_0"), PortRole::fabric);
  EXPECT_EQ(role(r, "mlx5_1"), PortRole::unused);
  EXPECT_NE(role_of(r, "mlx5_1:1").why.find("Polling"), std::string::npos);
}

// No switch anywhere (NICs and GPUs under their own root ports): every NIC is as near,
// and the fabric is the kind most of them are, not the front-end card beside them.
TEST(PortRoles, WithoutSwitchesTheFabricIsTheMostCommonKind) {
  std::vector<RolePort> ports;
  for (int i = 0; i < 4; ++i) ports.push_back(port("mlx5_" + std::to_string(i + 2), "MT4129", "Ethernet", {kSameNuma}));
  ports.push_back(port("mlx5_0", "MT4125", "Ethernet", {kSameNuma}));
  auto r = assign_roles(ports, 1, {});
  EXPECT_EQ(role(r, "mlx5_2"), PortRole::fabric);
  EXPECT_EQ(role(r, "mlx5_0"), PortRole::frontend);
}

// A compute port flipped to Ethernet is still the fabric: the ib check holds it to the
// fabric's link layer.
TEST(PortRoles, LinkLayerDoesNotDecideTheFabric) {
  auto r = assign_roles({port("mlx5_0", "MT4129", "InfiniBand", {4}), port("mlx5_1", "MT4129", "Ethernet", {4})}, 1, {});
  EXPECT_EQ(role(r, "mlx5_1"), PortRole::fabric);
}

TEST(PortRoles, BondsAreFrontEndAndNoGpuMeansEverythingIsTheFabric) {
  auto r = assign_roles({port("mlx5_0", "MT4129", "InfiniBand", {}), port("mlx5_bond_0", "MT4129", "Ethernet", {})}, 0,
                        {});
  EXPECT_EQ(role(r, "mlx5_0"), PortRole::fabric);
  EXPECT_EQ(role(r, "mlx5_bond_0"), PortRole::frontend);
}

// ib.roles: first match wins, by device pattern, port, or network interface.
TEST(PortRoles, ConfigSaysWhatTheNodeCannot) {
  RolePort eth = port("mlx5_4", "MT4129", "Ethernet", {4});
  eth.netdevs = {"enp41s0f1np1"};
  std::vector<RoleRule> rules(3);
  rules[0].netdev = "enp*s0f1np1";
  rules[0].role = PortRole::storage;
  rules[0].line = 7;
  rules[1].hca = "mlx5_[0-3]";
  rules[1].port = 2;
  rules[1].role = PortRole::unused;
  rules[2].hca = "mlx5_*";
  rules[2].role = PortRole::fabric;
  auto r = assign_roles({eth, port("mlx5_1", "MT4129", "InfiniBand", {kNoPath})}, 1, rules);
  EXPECT_EQ(role(r, "mlx5_4"), PortRole::storage);
  EXPECT_TRUE(role_of(r, "mlx5_4:1").from_config);
  EXPECT_EQ(role_of(r, "mlx5_4:1").why, "ib.roles, line 7");
  // port 2 does not match port 1; the catch-all does.
  EXPECT_EQ(role(r, "mlx5_1"), PortRole::fabric);
}

TEST(PortRoles, UnnamedPortIsTheFabric) { EXPECT_EQ(role_of({}, "mlx5_0:1").role, PortRole::fabric); }

TEST(PcieDistance, CountsLinksThroughTheNearestCommonBridge) {
  // GPU and NIC behind two downstream ports of one switch.
  auto gpu = dev("0000:13:00.0", {"0000:12:00.0", "0000:11:00.0", "0000:10:01.0"}, 0);
  auto nic = dev("0000:15:00.0", {"0000:12:02.0", "0000:11:00.0", "0000:10:01.0"}, 0);
  EXPECT_EQ(pcie_distance(gpu, nic), 4);
  auto storage = dev("0000:29:00.0", {"0000:28:01.0"}, 0);
  EXPECT_EQ(pcie_distance(gpu, storage), kSameNuma);
  auto far = dev("0000:aa:00.0", {"0000:a9:01.0"}, 1);
  EXPECT_EQ(pcie_distance(gpu, far), kNoPath);
  far.numa_node = std::nullopt;
  EXPECT_EQ(pcie_distance(gpu, far), kNoPath);
}

// The families' trees, read the way the ib check reads them.
TEST(PortRoles, FixtureFamilies) {
  struct Want {
    std::string variant, hca;
    PortRole role;
  };
  for (const Want& w : {Want{"dgx-h100", "mlx5_0", PortRole::fabric}, Want{"dgx-h100", "mlx5_11", PortRole::fabric},
                        Want{"dgx-h100", "mlx5_1", PortRole::storage}, Want{"dgx-h100", "mlx5_2", PortRole::frontend},
                        Want{"dgx-h100-basepod", "mlx5_7", PortRole::unused},
                        Want{"dgx-h100-basepod-port-down", "mlx5_0", PortRole::fabric},
                        Want{"p5-ubuntu", "rdmap20s0", PortRole::fabric},
                        Want{"p5-ubuntu-port-down", "rdmap21s0", PortRole::fabric},
                        Want{"baremetal-roce", "mlx5_17", PortRole::fabric},
                        Want{"baremetal-roce", "mlx5_0", PortRole::frontend},
                        Want{"healthy", "mlx5_7", PortRole::fabric}}) {
    RootedFs fs(std::string(GPUDIAG_FIXTURES_DIR) + "/" + w.variant);
    const IbInventory ib = discover_ib(fs);
    const PciInventory pci = discover_pci(fs);
    const PortRoles roles = port_roles(ib, &pci, IbExpect{});
    ASSERT_TRUE(roles.count(w.hca + ":1")) << w.variant << " " << w.hca;
    EXPECT_EQ(role(roles, w.hca), w.role) << w.variant << " " << w.hca << ": " << role_of(roles, w.hca + ":1").why;
  }
}
