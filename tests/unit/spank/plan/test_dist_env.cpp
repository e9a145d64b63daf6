// torch's and torchrun's variables (dist_env), and MASTER_PORT from the job, the step
// and the job's salt.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "spank/plan/dist_env.h"
#include "spank/plan/step_plan.h"

using namespace gpudiag;

TEST(DistEnv, TorchAndTorchrun) {
  TaskIds t;
  t.job_id = 7;
  t.rank = 5;
  t.world_size = 8;
  t.local_rank = 1;
  t.local_world_size = 4;
  t.node_rank = 1;
  t.num_nodes = 2;
  t.master_addr = "gpu-001";
  t.nproc_per_node = 4;
  std::map<std::string, std::string> e;
  for (auto& [k, v] : torch_env(t, {})) e[k] = v;
  for (auto& [k, v] : torchrun_env(t, {})) e[k] = v;
  EXPECT_EQ(e["RANK"], "5");
  EXPECT_EQ(e["WORLD_SIZE"], "8");
  EXPECT_EQ(e["LOCAL_RANK"], "1");
  EXPECT_EQ(e["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(e["MASTER_ADDR"], "gpu-001");
  EXPECT_EQ(e["PET_NNODES"], "2");
  EXPECT_EQ(e["PET_NODE_RANK"], "1");
  EXPECT_EQ(e["PET_NPROC_PER_NODE"], "4");
  EXPECT_EQ(e["PET_MASTER_PORT"], e["MASTER_PORT"]);
  EXPECT_EQ(e["PET_TEE"], "3");  // whole, tagged lines per worker
  EXPECT_EQ(e.count("TORCHELASTIC_RUN_ID"), 0u);
}

TEST(MasterPort, DeterministicInRangeAndPerStep) {
  PortRange r;
  int a = master_port(1234, 0, 0, r), b = master_port(1234, 1, 0, r);
  EXPECT_EQ(a, master_port(1234, 0, 0, r));
  EXPECT_NE(a, b);
  for (std::uint32_t job = 0; job < 5000; ++job) {
    int p = master_port(job, job % 7, 0xfedcba9876543210ull * job, r);
    ASSERT_GE(p, 61000);
    ASSERT_LE(p, 65535);
  }
  EXPECT_EQ(master_port(99, 3, 0, {30000, 30000}), 30000);
  EXPECT_EQ(master_port(99, 3, ~0ull, {30000, 30000}), 30000);
}

// Another user knows the job id, not the salt: the port moves with the salt, and the
// steps of one salted job still differ from each other.
TEST(MasterPort, TheSaltMovesAJobsPortsAndKeepsItsStepsApart) {
  PortRange r;
  std::set<int> seen;
  for (std::uint64_t salt : {1ull, 2ull, 0x9e3779b97f4a7c15ull, 0x0123456789abcdefull})
    seen.insert(master_port(4242, 0, salt, r));
  EXPECT_EQ(seen.size(), 4u);
  const std::uint64_t salt = 0x0123456789abcdefull;
  EXPECT_NE(master_port(4242, 0, salt, r), master_port(4242, 1, salt, r));
  EXPECT_EQ(master_port(4242, 0, salt, r), master_port(4242, 0, salt, r));
}

// One step's port must not tell the next step's: with a shift it was always +1.
TEST(MasterPort, OneStepsPortDoesNotTellTheNextOnes) {
  PortRange r;
  std::set<int> gaps;
  for (std::uint32_t step = 0; step < 20; ++step)
    gaps.insert(master_port(4242, step + 1, 0x5eed5eed5eed5eedull, r) - master_port(4242, step, 0x5eed5eed5eed5eedull, r));
  EXPECT_GT(gaps.size(), 15u);
}

// The plan reads the job's salt from the task's environment; a missing one is no salt.
TEST(MasterPort, ThePlanUsesTheJobsSalt) {
  StepInputs in;
  in.ids.job_id = 77;
  in.ids.step_id = 0;
  in.ids.master_addr = "n1";
  auto port_of = [](const StepPlan& plan) {
    for (const auto& [k, v] : plan.env)
      if (k == "MASTER_PORT") return std::stoi(v);
    return -1;
  };
  const PortRange r{in.cfg.plugin.master_port_first, in.cfg.plugin.master_port_last};
  EXPECT_EQ(port_of(plan_step(in)), master_port(77, 0, 0, r));
  in.env.port_salt = "00000000000004d2";
  EXPECT_EQ(port_of(plan_step(in)), master_port(77, 0, 0x4d2, r));
  EXPECT_NE(port_of(plan_step(in)), master_port(77, 0, 0, r));
  EXPECT_TRUE(plan_step(in).notices.empty());
  // A bad one is no salt, and rank 0 says what that costs and the fix.
  in.env.port_salt = "not-a-salt";
  const StepPlan bad = plan_step(in);
  EXPECT_EQ(port_of(bad), master_port(77, 0, 0, r));
  ASSERT_EQ(bad.notices.size(), 1u);
  EXPECT_NE(bad.notices[0].find("SLURM_GPUDIAG_PORT_SALT is not 16 lowercase hex digits"), std::string::npos);
  EXPECT_NE(bad.notices[0].find("unset it"), std::string::npos);
  in.ids.rank = 1;
  EXPECT_TRUE(plan_step(in).notices.empty());
}
