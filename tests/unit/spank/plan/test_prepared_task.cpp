// A task's plan made in user_init, before the fork (issue 34): when a task may take it, and
// that what it takes is what it would have planned itself.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spank/plan/diag_options.h"
#include "spank/plan/env_writer.h"
#include "spank/plan/port_salt.h"
#include "spank/plan/prepared_task.h"
#include "spank/plan/step_plan.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

namespace {

// Job 12 step 3, 4 tasks on 2 nodes; task 1 on node0, with the site's defaults.
StepInputs node_inputs() {
  StepInputs in;
  in.ids.job_id = 12;
  in.ids.step_id = 3;
  in.ids.rank = 1;
  in.ids.world_size = 4;
  in.ids.local_rank = 1;
  in.ids.local_world_size = 2;
  in.ids.node_rank = 0;
  in.ids.num_nodes = 2;
  in.ids.master_addr = "node0";
  in.env.step_nodelist = "node[0-1]";
  in.env.submit_dir = "/home/u/run";
  in.hostname = "node0.cluster.example";
  in.cwd = "/";
  in.nccl_env = {{"NCCL_IB_TIMEOUT", "22"}};
  return in;
}

// The job's environment in user_init: srun's variables and one of the user's.
MapEnv job_env() {
  MapEnv env;
  env.vars = {{"SLURM_STEP_NODELIST", "node[0-1]"}, {"SLURM_SUBMIT_DIR", "/home/u/run"}, {"HOME", "/home/u"},
              {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
  return env;
}

// What Slurm's exec_task adds in the task before task_init.
std::map<std::string, std::string> task_vars(const MapEnv& job) {
  auto vars = job.vars;
  vars["SLURMD_NODENAME"] = "node0";
  vars["SLURM_PROCID"] = "1";
  vars["SLURM_LOCALID"] = "1";
  return vars;
}

TaskView view_of(const TaskIds& ids, const EnvArray& env, const char* hostname = "node0.cluster.example") {
  TaskView v;
  v.ids = ids;
  v.env = env.ptrs.data();
  v.hostname = hostname;
  return v;
}

PreparedTask prepared(const StepInputs& in, MapEnv& env, bool fixed = true) {
  auto p = prepare_task(in, env, fixed);
  EXPECT_TRUE(p);
  return p ? *p : PreparedTask{};
}

// What the task would have done itself: plan_step and apply_env in its own environment.
std::map<std::string, std::string> planned_in_task(StepInputs in, std::map<std::string, std::string> vars) {
  MapEnv env;
  env.vars = std::move(vars);
  in.user_env = &env;
  StepPlan plan = plan_step(in);
  EXPECT_FALSE(plan.fail);
  apply_env(env, plan.env);
  return env.vars;
}

std::map<std::string, std::string> replayed(const PreparedTask& p, std::map<std::string, std::string> vars) {
  for (const auto& [name, value] : p.sets) vars[name] = value;
  return vars;
}

}  // namespace

TEST(PreparedTask, ATaskOfAPlainStepTakesThePlanAndGetsWhatItWouldHavePlanned) {
  StepInputs in = node_inputs();
  MapEnv job = job_env();
  PreparedTask p = prepared(in, job);
  // user_init did not write the job's environment.
  EXPECT_EQ(job.vars, job_env().vars);
  const auto vars = task_vars(job);
  EnvArray env(vars);
  ASSERT_TRUE(task_may_use(p, view_of(in.ids, env)));
  StepInputs task = in;
  task.env.nodename = "node0";
  EXPECT_EQ(replayed(p, vars), planned_in_task(task, vars));
  EXPECT_EQ(p.plan.host, "node0");
  EXPECT_EQ(p.plan.tag_text, plan_step(task).tag_text);
  // The user's value stays, and is what both torch names get (failfast_env).
  EXPECT_EQ(replayed(p, vars).at("NCCL_ASYNC_ERROR_HANDLING"), "3");
  EXPECT_EQ(replayed(p, vars).at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
  // The relay chosen ahead is the task's own choice for the usual streams.
  const StepPlan own_plan = plan_step(task);
  const RelayChoice own = plan_relay(own_plan, task.ids.rank, kPreparedStreams);
  ASSERT_TRUE(own.relay && p.relay) << "a plain step of two nodes tags its lines";
  EXPECT_EQ(p.relay->tag, own.relay->tag);
  EXPECT_EQ(p.relay->out, own.relay->out);
  EXPECT_EQ(p.relay->err, own.relay->err);
  EXPECT_EQ(p.relay->tag_out, own.relay->tag_out);
  EXPECT_EQ(p.relay->tag_err, own.relay->tag_err);
  EXPECT_EQ(p.relay->max_line, own.relay->max_line);
  EXPECT_EQ(p.relay->hang.duration_s, 0);
  EXPECT_EQ(own.notice, std::nullopt);
}

TEST(PreparedTask, PlansThatNeedTheTaskAreNotPrepared) {
  struct Case {
    const char* what;
    const char* diag;
    double site_hang_s;
    bool site_preflight;
  };
  const std::vector<Case> cases = {
      {"--diag: a diag dir to claim", "", 0, false},
      {"--diag=nccl=WARN", "nccl=WARN", 0, false},
      {"the site's hang watchdog", nullptr, 600, false},
      {"--diag=hang=", "hang=90s", 0, false},
      {"the site's preflight", nullptr, 0, true},
      {"--diag=preflight", "preflight", 0, false},
      {"--diag=fabric", "fabric", 0, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    StepInputs in = node_inputs();
    if (c.diag) {
      auto d = merge_diag_options("", std::string(c.diag));
      ASSERT_TRUE(d) << d.error();
      in.diag = *d;
    }
    in.cfg.plugin.hang.duration_s = c.site_hang_s;
    in.cfg.plugin.preflight.enabled = c.site_preflight;
    MapEnv job = job_env();
    EXPECT_FALSE(prepare_task(in, job, true));
  }
}

TEST(PreparedTask, ARefusalIsTheTasksOwn) {
  StepInputs in = node_inputs();
  RendezvousFacts f;
  f.target.var = "MASTER_ADDR";
  f.target.host = "nowhere";
  f.target.user_set = true;  // the user's own value that does not resolve fails the step
  f.resolve_error = "Name or service not known";
  in.rendezvous = {f};
  MapEnv job = job_env();
  EXPECT_FALSE(prepare_task(in, job, true));
}

TEST(PreparedTask, WhatDiffersInTheTaskSendsItToItsOwnPlan) {
  StepInputs in = node_inputs();
  in.cfg.plugin.nproc_per_node = 0;  // PET_NPROC_PER_NODE counts the task's GPUs
  MapEnv job = job_env();
  job.vars["CUDA_VISIBLE_DEVICES"] = "0,1";
  in.env.cuda_visible_devices = "0,1";
  PreparedTask p = prepared(in, job);
  struct Case {
    const char* what;
    std::string name;
    std::optional<std::string> value;  // nullopt: unset in the task
    bool fits;
  };
  const std::vector<Case> cases = {
      {"Slurm's node name, same short name", "SLURMD_NODENAME", "node0.cluster", true},
      {"another node name", "SLURMD_NODENAME", "node9", false},
      {"no node name: the host name", "SLURMD_NODENAME", std::nullopt, true},
      {"GRES binding: other GPUs, as many", "CUDA_VISIBLE_DEVICES", "2,3", true},
      {"GRES binding: fewer GPUs (--gpus-per-task)", "CUDA_VISIBLE_DEVICES", "1", false},
      {"no GPUs named", "CUDA_VISIBLE_DEVICES", std::nullopt, false},
      {"srun --label", "SLURM_LABELIO", "1", false},
      {"a job secret for the port", kPortSaltEnv, "0123456789abcdef", false},
      {"a variable the plan sets, set by another plugin", "MASTER_PORT", "29500", false},
      {"a renamed torch variable the user set", "NCCL_ASYNC_ERROR_HANDLING", "1", false},
      {"a user's value changed", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", false},
      {"a user's value gone", "TORCH_NCCL_ASYNC_ERROR_HANDLING", std::nullopt, false},
      {"the record of injected values", kInjectedVar, "MASTER_PORT:00000000", false},
      {"another nodelist, MASTER_ADDR already chosen", "SLURM_STEP_NODELIST", "node[5-6]", true},
      {"a variable the plan never reads", "OMP_NUM_THREADS", "4", true},
      {"the submit dir (only a diag dir reads it)", "SLURM_SUBMIT_DIR", "/elsewhere", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto vars = task_vars(job);
    if (c.value) vars[c.name] = *c.value;
    else vars.erase(c.name);
    EnvArray env(vars);
    EXPECT_EQ(task_may_use(p, view_of(in.ids, env)), c.fits);
    if (c.fits) {
      StepInputs task = in;
      task.env.cuda_visible_devices = vars.count("CUDA_VISIBLE_DEVICES") ? vars.at("CUDA_VISIBLE_DEVICES") : "";
      if (vars.count("SLURMD_NODENAME")) task.env.nodename = vars.at("SLURMD_NODENAME");
      EXPECT_EQ(replayed(p, vars), planned_in_task(task, vars));
    }
  }
}

TEST(PreparedTask, TheNodelistDecidesWhereUserInitChoseNoMasterAddr) {
  StepInputs in = node_inputs();
  MapEnv job = job_env();
  PreparedTask p = prepared(in, job, false);
  auto vars = task_vars(job);
  EXPECT_TRUE(task_may_use(p, view_of(in.ids, EnvArray(vars))));
  vars["SLURM_STEP_NODELIST"] = "node[5-6]";
  EXPECT_FALSE(task_may_use(p, view_of(in.ids, EnvArray(vars))));
}

TEST(PreparedTask, OtherIdsOrAnotherHostSendTheTaskToItsOwnPlan) {
  StepInputs in = node_inputs();
  MapEnv job = job_env();
  PreparedTask p = prepared(in, job);
  auto vars = task_vars(job);
  vars.erase("SLURMD_NODENAME");
  EnvArray env(vars);
  EXPECT_TRUE(task_may_use(p, view_of(in.ids, env)));
  EXPECT_FALSE(task_may_use(p, view_of(in.ids, env, "other.cluster.example")));
  TaskIds other = in.ids;
  other.rank = 3;  // S_TASK_GLOBAL_ID not what S_JOB_LOCAL_TO_GLOBAL_ID said
  EXPECT_FALSE(task_may_use(p, view_of(other, env)));
  other = in.ids;
  other.world_size = 8;
  EXPECT_FALSE(task_may_use(p, view_of(other, env)));
  TaskView none = view_of(in.ids, env);
  none.env = nullptr;
  EXPECT_FALSE(task_may_use(p, none));
}

TEST(PreparedTask, AValueTooLongToReadIsNeverTakenAsEqual) {
  StepInputs in = node_inputs();
  MapEnv job = job_env();
  const std::string long_value(kMaxDiagListBytes + 1, 'x');
  job.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = long_value;
  auto p = prepare_task(in, job, true);
  ASSERT_TRUE(p);
  // SpankEnv reads such a value as a stand-in: the task plans with what it reads itself.
  EXPECT_FALSE(task_may_use(*p, view_of(in.ids, EnvArray(task_vars(job)))));
  MapEnv plain = job_env();
  p = prepare_task(in, plain, true);
  ASSERT_TRUE(p);
  auto vars = task_vars(plain);
  EXPECT_TRUE(task_may_use(*p, view_of(in.ids, EnvArray(vars))));
  vars["SLURMD_NODENAME"] = "node0." + long_value;  // the same short name, unreadable in full
  EXPECT_FALSE(task_may_use(*p, view_of(in.ids, EnvArray(vars))));
}

TEST(PreparedTask, EnvLookupFindsTheFirstExactName) {
  EnvArray env({{"A", "1"}, {"AB", "2"}, {"B", ""}});
  EXPECT_EQ(env_lookup(env.ptrs.data(), "A"), std::optional<std::string_view>("1"));
  EXPECT_EQ(env_lookup(env.ptrs.data(), "AB"), std::optional<std::string_view>("2"));
  EXPECT_EQ(env_lookup(env.ptrs.data(), "B"), std::optional<std::string_view>(""));
  EXPECT_EQ(env_lookup(env.ptrs.data(), "C"), std::nullopt);
  EXPECT_EQ(env_lookup(nullptr, "A"), std::nullopt);
  const char* dup[] = {"X=first", "X=second", "Y", nullptr};
  EXPECT_EQ(env_lookup(dup, "X"), std::optional<std::string_view>("first"));
  EXPECT_EQ(env_lookup(dup, "Y"), std::nullopt);
  // Compared byte by byte: a name never reads past an entry's end, nor matches through a NUL.
  EXPECT_EQ(env_lookup(dup, "XX"), std::nullopt);
  EXPECT_EQ(env_lookup(dup, std::string_view("X\0", 2)), std::nullopt);
  EXPECT_EQ(env_lookup(dup, ""), std::nullopt);
}

// Adversary review 8: the byte-by-byte env_lookup (9405fe3) against the strlen version it
// replaced, for every entry over {A, B, =} up to 5 bytes and every name over {A, B, =, NUL}
// up to 4: the same answer, the same value (its bytes and where they lie), each time.
TEST(PreparedTask, EnvLookupAnswersAsTheStrlenVersionDid) {
  const auto strlen_lookup = [](const char* const* env, std::string_view name) -> std::optional<std::string_view> {
    for (const char* const* e = env; *e; ++e) {
      const std::string_view entry(*e);
      if (entry.size() > name.size() && entry[name.size()] == '=' && entry.compare(0, name.size(), name) == 0)
        return entry.substr(name.size() + 1);
    }
    return std::nullopt;
  };
  const auto all = [](std::string_view alphabet, std::size_t max_len) {
    std::vector<std::string> out{""};
    for (std::size_t from = 0; out.back().size() < max_len;) {
      const std::size_t to = out.size();
      for (std::size_t i = from; i < to; ++i)
        for (char c : alphabet) out.push_back(out[i] + c);
      from = to;
    }
    return out;
  };
  const auto entries = all("AB=", 5);
  const auto names = all(std::string_view("AB=\0", 4), 4);
  std::size_t checked = 0;
  for (const auto& entry : entries) {
    // Alone, and behind an entry that never matches a name without '=' in it.
    const char* alone[] = {entry.c_str(), nullptr};
    const char* behind[] = {"", "=", entry.c_str(), nullptr};
    for (const auto& name : names)
      for (const char* const* env : {static_cast<const char* const*>(alone), static_cast<const char* const*>(behind)}) {
        const auto want = strlen_lookup(env, name);
        const auto got = env_lookup(env, name);
        ASSERT_EQ(got.has_value(), want.has_value()) << "entry '" << entry << "' name size " << name.size();
        if (want) {
          ASSERT_EQ(got->data(), want->data());
          ASSERT_EQ(got->size(), want->size());
        }
        ++checked;
      }
  }
  EXPECT_GT(checked, 100000u);
}

// Adversary review 3, B2: the variables a plan copies are the user's (up to 8 KiB each),
// and root's slurmstepd keeps one plan per local task. A plain task's plan is a few KiB, so
// a node's 256 tasks fit the step's budget; a user's 8 KiB values make a plan of more than
// 100 KiB, and the budget stops the preparing after a few (each task then plans itself).
TEST(PreparedTask, APlanIsAFewKilobytesAndTheUsersLargeValuesCountInIt) {
  MapEnv env = job_env();
  const std::size_t plain = prepared_bytes(prepared(node_inputs(), env));
  EXPECT_LT(plain, 8192u);
  EXPECT_LT(256 * plain, kPreparedStepBudget);
  const std::string big(8191, 'x');
  for (const char* name : {"MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "PET_NNODES",
                           "PET_NODE_RANK", "PET_NPROC_PER_NODE", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                           "GPUDIAG_INJECTED", "NCCL_IB_TIMEOUT", "TORCHELASTIC_RUN_ID"})
    env.vars[name] = big;
  const std::size_t large = prepared_bytes(prepared(node_inputs(), env));
  EXPECT_GT(large, 12 * 8191u);
  EXPECT_LT(kPreparedStepBudget / large, 32u);
}

// user_init reads the job's environment once per name for all its local tasks' plans.
TEST(PreparedTask, TheJobsEnvironmentIsReadOncePerName) {
  struct Counting : MapEnv {
    std::map<std::string, int> reads;
    std::optional<std::string> get(const std::string& n) override {
      ++reads[n];
      return MapEnv::get(n);
    }
  } job;
  job.vars = job_env().vars;
  ReadOnceEnv env(job);
  StepInputs in = node_inputs();
  in.env = read_task_env(env);
  for (int local = 0; local < 2; ++local) {
    in.ids.rank = local;
    in.ids.local_rank = local;
    auto p = prepare_task(in, env, true);
    ASSERT_TRUE(p);
    MapEnv alone = job_env();
    EXPECT_EQ(p->sets, prepared(in, alone).sets);
  }
  for (const auto& [name, n] : job.reads) EXPECT_EQ(n, 1) << name;
  EXPECT_GT(job.reads.size(), 10u);
  EXPECT_FALSE(env.set("RANK", "0"));  // the plans write nothing to it
}
