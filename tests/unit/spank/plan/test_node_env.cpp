// What user_init adds to the job's environment for all the node's tasks (node_env.h, issue
// 34): each task ends with exactly the environment it would have made alone, and one that
// plans itself reads the environment as it was.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "spank/plan/env_writer.h"
#include "spank/plan/node_env.h"
#include "spank/plan/prepared_task.h"
#include "spank/plan/step_plan.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

namespace {

using Vars = std::map<std::string, std::string>;

// Job 7 step 0, 4 tasks on 2 nodes, seen from node0 (local tasks 0 and 1).
StepInputs node_task_inputs(int local_rank) {
  StepInputs in;
  in.ids.job_id = 7;
  in.ids.step_id = 0;
  in.ids.rank = local_rank;
  in.ids.world_size = 4;
  in.ids.local_rank = local_rank;
  in.ids.local_world_size = 2;
  in.ids.node_rank = 0;
  in.ids.num_nodes = 2;
  in.ids.master_addr = "node0";
  in.env.step_nodelist = "node[0-1]";
  in.hostname = "node0";
  in.cwd = "/";
  in.nccl_env = {{"NCCL_IB_TIMEOUT", "22"}};
  return in;
}

// The job's environment in user_init, one of the torch variables the user's own.
MapEnv node_job_env() {
  MapEnv env;
  env.vars = {{"SLURM_STEP_NODELIST", "node[0-1]"}, {"HOME", "/home/u"}, {"MASTER_PORT", "29500"}};
  return env;
}

Vars with_added(Vars vars, const NodeEnv& node) {
  for (const auto& [name, value] : node.added) vars[name] = value;
  return vars;
}

Vars edited(Vars vars, const std::vector<EnvEdit>& edits) {
  for (const auto& e : edits) {
    if (e.value) vars[e.name] = *e.value;
    else vars.erase(e.name);
  }
  return vars;
}

Vars replayed_over(Vars vars, const EnvList& sets) {
  for (const auto& [name, value] : sets) vars[name] = value;
  return vars;
}

PreparedTask prepared_for(int local_rank, MapEnv& job) {
  auto p = prepare_task(node_task_inputs(local_rank), job, true);
  EXPECT_TRUE(p);
  return p ? *p : PreparedTask{};
}

TaskView view_with(const PreparedTask& p, const EnvArray& env, const NodeEnv* added) {
  TaskView v;
  v.ids = p.ids;
  v.env = env.ptrs.data();
  v.hostname = "node0";
  v.added = added;
  return v;
}

}  // namespace

TEST(NodeEnv, EachTaskEndsWithWhatItWouldHaveSetAlone) {
  MapEnv job = node_job_env();
  const PreparedTask first = prepared_for(0, job), second = prepared_for(1, job);
  const NodeEnv node = node_env_of(first, job);
  // What the job's environment held is not added: the user's MASTER_PORT stays the user's.
  EXPECT_FALSE(added_by_node(node, "MASTER_PORT"));
  EXPECT_TRUE(added_by_node(node, "RANK"));
  EXPECT_TRUE(added_by_node(node, "WORLD_SIZE"));
  EXPECT_EQ(job.vars, node_job_env().vars);  // node_env_of only reads

  for (const PreparedTask* p : {&first, &second}) {
    const Vars task = with_added(job.vars, node);
    EnvArray env(task);
    ASSERT_TRUE(node_env_intact(node, env.ptrs.data()));
    ASSERT_TRUE(task_may_use(*p, view_with(*p, env, &node)));
    const auto edits = task_env_edits(node, p->sets);
    EXPECT_EQ(edited(task, edits), replayed_over(job.vars, p->sets));
    // Only what differs from the first task: its ranks and the record that names them.
    EXPECT_LE(edits.size(), p == &first ? 0u : 3u);
  }
}

TEST(NodeEnv, TheAddedNamesAreReadAsUnsetOnlyWhereTheCallerSaysSo) {
  MapEnv job = node_job_env();
  const PreparedTask first = prepared_for(0, job);
  const NodeEnv node = node_env_of(first, job);
  EnvArray env(with_added(job.vars, node));
  // Read as they are, the added RANK and WORLD_SIZE are not what the plan read.
  EXPECT_FALSE(task_may_use(first, view_with(first, env, nullptr)));
  EXPECT_TRUE(task_may_use(first, view_with(first, env, &node)));
}

TEST(NodeEnv, AnAddedValueChangedSinceSendsTheTaskToItsOwnPlanWithTheRestTakenAway) {
  MapEnv job = node_job_env();
  const PreparedTask first = prepared_for(0, job);
  const NodeEnv node = node_env_of(first, job);
  Vars task = with_added(job.vars, node);
  task["WORLD_SIZE"] = "64";  // another plugin's user_init, after gpudiag's
  EnvArray env(task);
  EXPECT_FALSE(node_env_intact(node, env.ptrs.data()));
  // What still holds gpudiag's value goes; the other plugin's value stays, as it would have.
  Vars expected = job.vars;
  expected["WORLD_SIZE"] = "64";
  EXPECT_EQ(edited(task, node_env_removal(node, env.ptrs.data())), expected);
}

TEST(NodeEnv, WhatTheTaskDoesNotSetIsUnsetAndTheLastOfTwoSetsStands) {
  NodeEnv node;
  node.added = {{"A", "1"}, {"B", "2"}, {"D", "4"}};
  const EnvList sets = {{"A", "1"}, {"C", "3"}, {"D", "x"}, {"D", "4"}};
  const Vars before = {{"HOME", "/h"}};
  const Vars after = edited(with_added(before, node), task_env_edits(node, sets));
  EXPECT_EQ(after, (Vars{{"HOME", "/h"}, {"A", "1"}, {"C", "3"}, {"D", "4"}}));
  const auto edits = task_env_edits(node, {{"A", "2"}, {"A", "1"}});
  EXPECT_EQ(edited(with_added(before, node), edits), (Vars{{"HOME", "/h"}, {"A", "1"}}));
}

TEST(NodeEnv, NothingAddedChangesNothing) {
  const NodeEnv node;
  const Vars vars = {{"HOME", "/h"}};
  EnvArray env(vars);
  EXPECT_TRUE(node_env_intact(node, env.ptrs.data()));
  EXPECT_TRUE(node_env_removal(node, env.ptrs.data()).empty());
  const EnvList sets = {{"RANK", "3"}};
  const auto edits = task_env_edits(node, sets);
  ASSERT_EQ(edits.size(), 1u);
  EXPECT_EQ(edits[0].name, "RANK");
  EXPECT_EQ(edits[0].value, "3");
}
