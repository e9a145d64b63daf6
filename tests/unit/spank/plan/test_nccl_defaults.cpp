// NCCL defaults from this node's facts (nccl_defaults): NCCL_IB_HCA auto.
#include <gtest/gtest.h>

#include "spank/plan/nccl_defaults.h"

using namespace gpudiag;

TEST(NcclDefaults, AutoIbHcaIsExactActiveIbNonBond) {
  IbInventory inv;
  inv.class_present = true;
  auto add = [&](const std::string& name, const char* state, const char* ll) {
    IbHca h;
    h.name = name;
    IbPort p;
    p.hca = name;
    p.number = 1;
    p.state = parse_port_state(state, "s");
    p.phys_state = parse_port_state(std::string(state) == "4: ACTIVE" ? "5: LinkUp" : "2: Polling", "p");
    p.link_layer = parse_link_layer(ll, "l");
    h.ports.push_back(p);
    inv.hcas.push_back(h);
  };
  add("mlx5_0", "4: ACTIVE", "InfiniBand");
  add("mlx5_1", "1: DOWN", "InfiniBand");
  add("mlx5_10", "4: ACTIVE", "InfiniBand");
  add("mlx5_bond_0", "4: ACTIVE", "Ethernet");
  add("mlx5_mgmt", "4: ACTIVE", "InfiniBand");
  IbExpect expect;
  expect.exclude = {"mlx5_mgmt"};
  EXPECT_EQ(auto_ib_hca(inv, expect), "=mlx5_0,mlx5_10");
  PluginSettings p;
  p.nccl_env = {{"NCCL_SOCKET_IFNAME", "^docker,lo"}, {"NCCL_IB_HCA", "auto"}};
  auto env = nccl_defaults(p, inv, expect);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[1].second, "=mlx5_0,mlx5_10");
  EXPECT_TRUE(nccl_defaults(p, IbInventory{}, expect).size() == 1);  // no HCA: NCCL_IB_HCA unset
}
