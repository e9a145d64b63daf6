// What srun sets once for every task of a step (issue 34): each task then sets only its
// own, and ends with exactly the environment it would have had without srun's part.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "spank/plan/env_writer.h"
#include "spank/plan/step_plan.h"
#include "spank/plan/step_wide_env.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

namespace {

// Job 12 step 3, 8 tasks on 2 nodes, as srun knows it.
StepInputs srun_inputs() {
  StepInputs in;
  in.cfg.plugin.nccl_env = {{"NCCL_SOCKET_IFNAME", "^docker,lo"}, {"NCCL_IB_HCA", "auto"}};
  in.cfg.plugin.failfast.heartbeat_timeout_s = 300;
  in.ids.job_id = 12;
  in.ids.step_id = 3;
  in.ids.world_size = 8;
  in.ids.num_nodes = 2;
  in.ids.master_addr = "node0";
  in.env.step_nodelist = "node[0-1]";
  in.env.port_salt = "0123456789abcdef";
  in.hostname = "login1";
  in.cwd = "/home/u";
  return in;
}

// One task of that step as its slurmstepd plans it.
StepInputs task_inputs(int rank, int local_rank, int node, const char* gpus) {
  StepInputs in = srun_inputs();
  in.ids.rank = rank;
  in.ids.local_rank = local_rank;
  in.ids.local_world_size = 4;
  in.ids.node_rank = node;
  in.env.nodename = "node" + std::to_string(node);
  in.hostname = *in.env.nodename;
  if (gpus) in.env.cuda_visible_devices = gpus;
  in.nccl_env = {{"NCCL_SOCKET_IFNAME", "^docker,lo"}, {"NCCL_IB_HCA", "=mlx5_0"}};
  RendezvousFacts f;
  f.target.var = "MASTER_ADDR";
  f.local_interface = "ib0";
  in.rendezvous = {f};
  return in;
}

// Counts what a task sets.
struct CountingEnv : MapEnv {
  std::vector<std::string> sets;
  bool set(const std::string& n, const std::string& v) override {
    sets.push_back(n);
    return MapEnv::set(n, v);
  }
};

// The task's final environment and what it set, from `start` (the job's environment).
std::pair<std::map<std::string, std::string>, std::vector<std::string>> run_task(StepInputs in, const MapEnv& start) {
  CountingEnv env;
  env.vars = start.vars;
  in.user_env = &env;
  apply_env(env, plan_step(in).env);
  return {env.vars, env.sets};
}

}  // namespace

TEST(StepWideEnv, HoldsWhatEveryTaskSetsAlike) {
  const EnvList common = step_wide_env(srun_inputs());
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "PET_NNODES", "PET_MASTER_ADDR",
                           "PET_MASTER_PORT", "PET_TEE", "NCCL_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                           "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"})
    EXPECT_TRUE(env_of(common, name)) << name;
  // A task's own, its node's, and what each node finds for itself.
  for (const char* name : {"RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
                           "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA"})
    EXPECT_FALSE(env_of(common, name)) << name;
  EXPECT_EQ(env_of(common, "WORLD_SIZE"), "8");
}

// The promise: with srun's part in place or not, every task ends with the same variables
// (GPUDIAG_INJECTED included), and with it in place sets only its own.
TEST(StepWideEnv, EachTaskEndsAsItWouldAlone) {
  MapEnv job;
  job.vars = {{"HOME", "/home/u"}, {"NCCL_SOCKET_IFNAME", "eth0"}};  // one the user set
  MapEnv srun = job;
  StepInputs s = srun_inputs();
  s.user_env = &srun;
  apply_env(srun, step_wide_env(s));
  EXPECT_EQ(srun.vars["NCCL_SOCKET_IFNAME"], "eth0");
  for (auto [rank, local, node, gpus] : {std::tuple{0, 0, 0, "0"}, std::tuple{5, 1, 1, "1"},
                                         std::tuple{3, 3, 0, (const char*)nullptr}, std::tuple{7, 3, 1, "GPU-ab"}}) {
    const auto alone = run_task(task_inputs(rank, local, node, gpus), job);
    const auto after_srun = run_task(task_inputs(rank, local, node, gpus), srun);
    EXPECT_EQ(after_srun.first, alone.first) << rank;
    EXPECT_LT(after_srun.second.size(), alone.second.size());
    for (const auto& name : after_srun.second) EXPECT_FALSE(env_of(step_wide_env(s), name)) << name;
  }
  const auto sets = run_task(task_inputs(5, 1, 1, "1"), srun).second;
  EXPECT_EQ(sets, (std::vector<std::string>{"RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
                                            "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", kInjectedVar}));
}

// What srun got wrong (here: another first host than the nodes see) the task sets again.
TEST(StepWideEnv, AValueSrunGotWrongIsSetAgain) {
  MapEnv job;
  MapEnv srun;
  StepInputs s = srun_inputs();
  s.ids.master_addr = "10.0.0.1";
  apply_env(srun, step_wide_env(s));
  const auto alone = run_task(task_inputs(2, 2, 0, "0"), job);
  const auto after_srun = run_task(task_inputs(2, 2, 0, "0"), srun);
  EXPECT_EQ(after_srun.first, alone.first);
  EXPECT_EQ(after_srun.first.at("MASTER_ADDR"), "node0");
}

// A step whose tasks claim a diag dir, or a batch script: srun sets nothing for them.
TEST(StepWideEnv, NothingForStepsThatPlanAlone) {
  StepInputs diag = srun_inputs();
  diag.diag.enabled = true;
  EXPECT_TRUE(step_wide_env(diag).empty());
  StepInputs hang = srun_inputs();
  hang.cfg.plugin.hang.duration_s = 60;
  EXPECT_TRUE(step_wide_env(hang).empty());
  StepInputs batch = srun_inputs();
  batch.ids.step_id = 0xfffffffb;
  EXPECT_TRUE(step_wide_env(batch).empty());
  StepInputs off = srun_inputs();
  off.cfg.plugin.torch_env = off.cfg.plugin.torchrun_env = false;
  off.cfg.plugin.failfast.enabled = false;
  off.cfg.plugin.nccl_env.clear();
  EXPECT_TRUE(step_wide_env(off).empty());
}

// Setting a variable to the value it has, as the plugin's own, costs nothing.
TEST(EnvWriter, AValueAlreadyInPlaceIsNotSetAgain) {
  CountingEnv env;
  apply_env(env, {{"WORLD_SIZE", "4"}, {"MASTER_PORT", "61001"}});
  env.sets.clear();
  apply_env(env, {{"WORLD_SIZE", "4"}, {"MASTER_PORT", "61001"}});
  EXPECT_TRUE(env.sets.empty());
  apply_env(env, {{"WORLD_SIZE", "4"}, {"RANK", "2"}});
  EXPECT_EQ(env.sets, (std::vector<std::string>{"RANK", kInjectedVar}));
  EXPECT_EQ(env.vars[kInjectedVar], "MASTER_PORT:" + injected_value_tag("61001") + ",RANK:" +
                                        injected_value_tag("2") + ",WORLD_SIZE:" + injected_value_tag("4"));
}
