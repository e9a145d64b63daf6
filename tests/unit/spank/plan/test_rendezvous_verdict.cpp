// The rendezvous address (issue 22): MASTER_ADDR from Slurm's address for the step's
// first node, and the verdict that fails a step whose rendezvous cannot work.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "spank/plan/rendezvous_verdict.h"
#include "spank/plan/step_plan.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

namespace {

RendezvousFacts unresolved(const std::string& var, const std::string& host, bool user_set) {
  RendezvousFacts f;
  f.target.var = var;
  f.target.host = host;
  f.target.user_set = user_set;
  f.resolve_error = "Name or service not known";
  return f;
}

StepInputs task(int local_rank) {
  StepInputs in;
  in.ids.job_id = 7;
  in.ids.step_id = 0;
  in.ids.rank = local_rank;
  in.ids.world_size = 2;
  in.ids.local_rank = local_rank;
  in.ids.local_world_size = 2;
  in.ids.master_addr = "gpu001";
  in.env.nodename = "gpu017";
  in.hostname = "gpu017";
  return in;
}

}  // namespace

TEST(MasterAddr, EachModeAndItsFallback) {
  const SlurmNodeAddr slurm{"10.1.0.1", "gpu001-host"};
  EXPECT_EQ(choose_master_addr("auto", "gpu001", slurm), "10.1.0.1");
  EXPECT_EQ(choose_master_addr("address", "gpu001", slurm), "10.1.0.1");
  EXPECT_EQ(choose_master_addr("hostname", "gpu001", slurm), "gpu001-host");
  EXPECT_EQ(choose_master_addr("name", "gpu001", slurm), "gpu001");
  // Slurm told nothing (no node table in this process): the NodeName, as before.
  for (const char* mode : {"auto", "address", "hostname", "name"})
    EXPECT_EQ(choose_master_addr(mode, "gpu001", std::nullopt), "gpu001") << mode;
  EXPECT_EQ(choose_master_addr("hostname", "gpu001", SlurmNodeAddr{"10.1.0.1", ""}), "gpu001");
  EXPECT_EQ(choose_master_addr("auto", "gpu001", SlurmNodeAddr{"", "h"}), "gpu001");
  // Nothing that apply_env would refuse reaches the task.
  EXPECT_EQ(choose_master_addr("hostname", "gpu001", SlurmNodeAddr{"", "evil\nname"}), "gpu001");
}

TEST(MasterAddr, PlannedRendezvousEnvFollowsTheSwitches) {
  TaskIds ids;
  ids.job_id = 7;
  ids.master_addr = "10.1.0.1";
  PluginSettings p;
  auto env = planned_rendezvous_env(p, ids);
  EXPECT_EQ(env_of(env, "MASTER_ADDR"), "10.1.0.1");
  EXPECT_EQ(env_of(env, "PET_MASTER_ADDR"), "10.1.0.1");
  EXPECT_EQ(env_of(env, "MASTER_PORT"), env_of(env, "PET_MASTER_PORT"));
  EXPECT_FALSE(env_of(env, "RANK"));
  p.torch_env = false;
  env = planned_rendezvous_env(p, ids);
  EXPECT_FALSE(env_of(env, "MASTER_ADDR"));
  EXPECT_TRUE(env_of(env, "PET_MASTER_ADDR"));
  ids.master_addr.clear();
  EXPECT_TRUE(planned_rendezvous_env(p, ids).empty());
}

TEST(Rendezvous, VerdictNamesNodeAddressAndFix) {
  auto v = judge_rendezvous({unresolved("MASTER_ADDR", "gpu001", false)}, "gpu017", true, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_EQ(*v.fail,
            "gpudiag: MASTER_ADDR gpu001 does not resolve on gpu017: Name or service not known; set "
            "plugin.master_addr: address in gpudiag.yaml (the node's NodeAddr), or fix name resolution "
            "(/etc/hosts, DNS)");
  // Without the preflight the plugin's own value only warns: the program may not be torch.
  v = judge_rendezvous({unresolved("MASTER_ADDR", "gpu001", false)}, "gpu017", false, 3);
  EXPECT_FALSE(v.fail);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("--diag=preflight makes this an error"), std::string::npos);
  // A value the user set fails either way, with the fix that is theirs to make.
  v = judge_rendezvous({unresolved("PET_MASTER_ADDR", "nohost", true)}, "gpu017", false, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_EQ(v.fail->rfind("gpudiag: PET_MASTER_ADDR nohost does not resolve on gpu017: ", 0), 0u) << *v.fail;
  EXPECT_NE(v.fail->find("set PET_MASTER_ADDR to a name or address that resolves"), std::string::npos);

  RendezvousFacts slow = unresolved("MASTER_ADDR", "gpu001", true);
  slow.resolve_error.clear();
  slow.timed_out = true;
  v = judge_rendezvous({slow}, "gpu017", false, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("did not resolve on gpu017 within 3 s"), std::string::npos);

  RendezvousFacts routeless;
  routeless.target = {"MASTER_ADDR", "10.9.9.9", 61007, false, false};
  routeless.addresses = {"10.9.9.9"};
  routeless.route_error = "Network is unreachable";
  v = judge_rendezvous({routeless}, "gpu017", true, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("MASTER_ADDR 10.9.9.9 (10.9.9.9) cannot be reached from gpu017: Network is unreachable"),
            std::string::npos);

  RendezvousFacts taken;
  taken.target = {"MASTER_ADDR", "10.1.0.1", 61007, false, true};
  taken.addresses = {"10.1.0.1"};
  taken.bind_error = "Address already in use";
  v = judge_rendezvous({taken}, "gpu001", true, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("port 61007 for MASTER_ADDR cannot be bound on gpu001: Address already in use"),
            std::string::npos);

  RendezvousFacts fine;
  fine.target = {"MASTER_ADDR", "10.1.0.1", 61007, true, false};
  fine.addresses = {"10.1.0.1"};
  v = judge_rendezvous({fine}, "gpu017", true, 3);
  EXPECT_FALSE(v.fail);
  EXPECT_TRUE(v.warnings.empty());
}

TEST(Rendezvous, PlanFailsEveryTaskAndWarnsOnce) {
  StepInputs in = task(1);
  in.rendezvous = {unresolved("MASTER_ADDR", "gpu001", false)};
  StepPlan plan = plan_step(in);
  EXPECT_FALSE(plan.fail);
  EXPECT_TRUE(plan.notices.empty());  // local task 0 says it
  in = task(0);
  in.rendezvous = {unresolved("MASTER_ADDR", "gpu001", false)};
  plan = plan_step(in);
  EXPECT_FALSE(plan.fail);
  ASSERT_EQ(plan.notices.size(), 1u);
  EXPECT_NE(plan.notices[0].find("on gpu017"), std::string::npos);
  EXPECT_EQ(env_of(plan.env, "MASTER_ADDR"), "gpu001");

  in.diag = *parse_diag_list("preflight");
  for (int local : {0, 1}) {
    in.ids.local_rank = local;
    plan = plan_step(in);
    ASSERT_TRUE(plan.fail) << local;
    EXPECT_TRUE(plan.env.empty());
  }
}
