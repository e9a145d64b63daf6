// The step plan (issue 20): every decision the plugin makes for a task, from the site
// config, GPUDIAG_DIAG, --diag, the task's variables and its Slurm ids.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "spank/plan/env_writer.h"
#include "spank/plan/step_plan.h"
#include "util/visible_gpus.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

namespace {

DiagOptions diag(const std::string& list) {
  auto d = parse_diag_list(list);
  EXPECT_TRUE(d) << d.error();
  return d ? *d : DiagOptions{};
}

// A 2-node, 4-task step (job 12, step 3), task 1 on node0, as srun starts it from /home/u/run.
StepInputs step_inputs() {
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
  in.env.submit_dir = "/home/u/run";
  in.env.nodename = "node0";
  in.env.cuda_visible_devices = "0,1";
  in.cwd = "/home/u/cwd";
  in.hostname = "node0.cluster.example";
  in.uid = 1000;
  return in;
}

}  // namespace

TEST(StepPlan, MergeRulesGpudiagDiagThenOption) {
  struct Case {
    std::string from_env;
    std::optional<std::string> option;
    bool enabled;
    std::string level;
    std::optional<bool> prefix;
    std::optional<double> hang_s;
  };
  const std::vector<Case> cases = {
      {"", std::nullopt, false, "INFO", std::nullopt, std::nullopt},
      {"", "", true, "INFO", std::nullopt, std::nullopt},  // a bare --diag
      {"nccl=WARN", std::nullopt, true, "WARN", std::nullopt, std::nullopt},
      {"nccl=WARN", "nccl=TRACE", true, "TRACE", std::nullopt, std::nullopt},  // the option wins
      {"nccl=WARN,hang=5m", "noprefix", true, "WARN", false, 300},             // item by item
      {"noprefix", "prefix,hang=0", true, "INFO", true, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("GPUDIAG_DIAG='" + c.from_env + "' --diag=" + c.option.value_or("(none)"));
    auto d = merge_diag_options(c.from_env, c.option);
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->enabled, c.enabled);
    EXPECT_EQ(d->nccl_level, c.level);
    EXPECT_EQ(d->prefix, c.prefix);
    EXPECT_EQ(d->hang_s, c.hang_s);
  }
}

TEST(StepPlan, MergeErrorsNameWhereTheListCameFrom) {
  auto from_env = merge_diag_options("bogus", std::nullopt);
  ASSERT_FALSE(from_env);
  EXPECT_EQ(from_env.error().rfind("gpudiag: --diag: unknown item 'bogus'", 0), 0u) << from_env.error();
  EXPECT_NE(from_env.error().find("(from GPUDIAG_DIAG)"), std::string::npos);
  auto from_option = merge_diag_options("nccl=WARN", std::string("nccl=LOUD"));
  ASSERT_FALSE(from_option);
  EXPECT_EQ(from_option.error().find("GPUDIAG_DIAG"), std::string::npos) << from_option.error();
  // A bad GPUDIAG_DIAG fails even when --diag is fine: it is part of the step's list.
  EXPECT_FALSE(merge_diag_options("hang=soon", std::string("nccl=WARN")));
}

TEST(StepPlan, SiteSettingsGiveWayToDiagItems) {
  struct Case {
    const char* what;
    double site_hang_s;
    std::string site_action;
    bool site_preflight;
    std::string list;  // "" : no --diag at all
    double hang_s;
    bool kill;
    bool preflight;
  };
  const std::vector<Case> cases = {
      {"site defaults only", 0, "kill", false, "", 0, true, false},
      {"site watchdog", 600, "report", true, "", 600, false, true},
      {"--diag turns the watchdog on", 0, "kill", false, "hang=90s", 90, true, false},
      {"--diag turns the site's off", 600, "kill", false, "hang=0", 0, true, false},
      {"--diag action and preflight", 600, "kill", true, "hang-action=report,nopreflight", 600, false, false},
      {"--diag preflight", 0, "kill", false, "preflight", 0, true, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    StepInputs in = step_inputs();
    in.cfg.plugin.hang.duration_s = c.site_hang_s;
    in.cfg.plugin.hang.action = c.site_action;
    in.cfg.plugin.preflight.enabled = c.site_preflight;
    if (!c.list.empty()) in.diag = diag(c.list);
    StepPlan plan = plan_step(in);
    EXPECT_EQ(plan.hang.duration_s, c.hang_s);
    if (c.hang_s > 0) {
      EXPECT_EQ(plan.hang.kill, c.kill);
    }
    EXPECT_EQ(plan.preflight, c.preflight);
    EXPECT_EQ(plan.hang_asked, c.list.find("hang=") != std::string::npos);
  }
}

TEST(StepPlan, DiagDirRule) {
  struct Case {
    const char* what;
    std::string list;  // "" : no --diag
    double site_hang_s;
    std::optional<std::string> submit_dir;
    std::string dir;  // "" : none
  };
  const std::vector<Case> cases = {
      {"no --diag, no watchdog: no dir", "", 0, "/home/u/run", ""},
      {"--diag: under the submit dir", "nccl=INFO", 0, "/home/u/run", "/home/u/run/gpudiag-12.3"},
      {"no submit dir: under the cwd", "nccl=INFO", 0, std::nullopt, "/home/u/cwd/gpudiag-12.3"},
      {"dir= wins", "dir=/scratch/u/d", 0, "/home/u/run", "/scratch/u/d"},
      {"the site's watchdog alone needs one", "", 600, "/home/u/run", "/home/u/run/gpudiag-12.3"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    StepInputs in = step_inputs();
    in.cfg.plugin.hang.duration_s = c.site_hang_s;
    in.env.submit_dir = c.submit_dir;
    if (!c.list.empty()) in.diag = diag(c.list);
    EXPECT_EQ(wanted_diag_dir(in), c.dir);
    StepPlan plan = plan_step(in);
    EXPECT_FALSE(plan.fail);
    EXPECT_EQ(plan.diag_dir, c.dir);
    EXPECT_EQ(env_of(plan.env, "GPUDIAG_DIAG_DIR"), c.dir.empty() ? std::nullopt : std::optional(c.dir));
    EXPECT_EQ(plan.hang.duration_s, c.site_hang_s);
    // NCCL logs only for --diag, not for the site's watchdog.
    EXPECT_EQ(env_of(plan.env, "NCCL_DEBUG_FILE").has_value(), !c.list.empty());
  }
  // srun's summary reads the dir by the same rule.
  EXPECT_EQ(diag_dir_path(diag("nccl=INFO"), "/home/u/run", "/x", 12, 3), "/home/u/run/gpudiag-12.3");
  EXPECT_EQ(diag_dir_path(diag("dir=/scratch/u/d"), "/home/u/run", "/x", 12, 3), "/scratch/u/d");
}

TEST(StepPlan, DiagDirThatCannotBeClaimed) {
  const DiagDirProblem held{DiagDirProblem::kNotYours, "the diag dir /home/u/run/gpudiag-12.3 belongs to another user"};
  const DiagDirProblem cannot{DiagDirProblem::kCannotCreate, "cannot create the diag dir /x: Permission denied"};
  struct Case {
    const char* what;
    std::string list;
    double site_hang_s;
    DiagDirProblem problem;
    bool fail;
  };
  const std::vector<Case> cases = {
      {"a dir the user named fails the task", "dir=/scratch/u/d", 0, held, true},
      {"one that cannot be made fails a --diag step", "nccl=INFO", 0, cannot, true},
      {"the default held by a neighbour is skipped", "nccl=INFO", 0, held, false},
      {"the site's watchdog keeps running without the dir, never fails", "", 600, cannot, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    for (int local_rank : {0, 1}) {
      StepInputs in = step_inputs();
      in.ids.local_rank = local_rank;
      in.cfg.plugin.hang.duration_s = c.site_hang_s;
      if (!c.list.empty()) in.diag = diag(c.list);
      in.dir_problem = c.problem;
      StepPlan plan = plan_step(in);
      ASSERT_EQ(plan.fail.has_value(), c.fail);
      if (c.fail) {
        EXPECT_NE(plan.fail->find(c.problem.why), std::string::npos) << *plan.fail;
        EXPECT_TRUE(plan.env.empty());
        continue;
      }
      // The step runs without the dir, and its first task on each node says why.
      EXPECT_EQ(plan.notices.size(), local_rank == 0 ? 1u : 0u);
      EXPECT_EQ(plan.diag_dir, "");
      // A neighbour who takes the dir's name must not switch the watchdog off: it stays
      // on, and its report goes to the task's stderr (no diag dir).
      EXPECT_EQ(plan.hang.duration_s, c.site_hang_s);
      EXPECT_EQ(plan.hang.diag_dir, "");
      EXPECT_FALSE(env_of(plan.env, "GPUDIAG_DIAG_DIR"));
      EXPECT_FALSE(env_of(plan.env, "NCCL_DEBUG_FILE"));
      EXPECT_FALSE(env_of(plan.env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"));
    }
  }
}

TEST(StepPlan, PrefixOnOrOff) {
  struct Case {
    const char* what;
    int world_size;
    std::string list;
    std::string site;
    std::optional<std::string> labelio;
    bool tag;
  };
  const std::vector<Case> cases = {
      {"one task", 1, "", "auto", std::nullopt, false},
      {"several tasks", 4, "", "auto", std::nullopt, true},
      {"noprefix", 4, "noprefix", "auto", std::nullopt, false},
      {"prefix for one task", 1, "prefix", "auto", std::nullopt, true},
      {"srun --label tags already", 4, "", "auto", "1", false},
      {"--label beats prefix", 4, "prefix", "auto", "1", false},
      {"site always", 1, "", "always", std::nullopt, true},
      {"site never", 4, "", "never", std::nullopt, false},
      {"--diag beats the site", 4, "prefix", "never", std::nullopt, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    StepInputs in = step_inputs();
    in.ids.world_size = c.world_size;
    in.cfg.plugin.prefix = c.site;
    in.env.labelio = c.labelio;
    if (!c.list.empty()) in.diag = diag(c.list);
    StepPlan plan = plan_step(in);
    EXPECT_EQ(plan.tag, c.tag);
    EXPECT_EQ(plan.tag_text, "[node0:1]");
  }
}

TEST(StepPlan, RelayOnlyWhereItHasAJob) {
  StepPlan tagged;
  tagged.tag = true;
  tagged.tag_text = "[node0:1]";
  StepPlan watched;
  watched.hang.duration_s = 60;
  watched.hang_asked = true;
  const StreamFacts pipes{true, true, false, false};
  const StreamFacts files{false, false, false, false};
  const StreamFacts pty{false, false, true, true};

  auto c = plan_relay(tagged, 1, pipes);
  ASSERT_TRUE(c.relay);
  EXPECT_TRUE(c.relay->out && c.relay->err && c.relay->tag_out && c.relay->tag_err);
  EXPECT_EQ(c.relay->tag, "[node0:1]");
  // -o out.%t: no tag, and no relay without a watchdog.
  EXPECT_FALSE(plan_relay(tagged, 1, files).relay);
  // The watchdog watches files too, without tagging them.
  c = plan_relay(watched, 1, files);
  ASSERT_TRUE(c.relay);
  EXPECT_TRUE(c.relay->out && c.relay->err);
  EXPECT_FALSE(c.relay->tag_out || c.relay->tag_err);
  EXPECT_EQ(c.relay->hang.duration_s, 60);
  // --pty: nothing to watch, and a user who asked for hang= is told.
  c = plan_relay(watched, 1, pty);
  EXPECT_FALSE(c.relay);
  ASSERT_TRUE(c.notice);
  EXPECT_EQ(c.notice->rfind("gpudiag: hang=: no hang watchdog for task 1", 0), 0u) << *c.notice;
  watched.hang_asked = false;  // the site's watchdog: nothing to tell on each --pty
  EXPECT_FALSE(plan_relay(watched, 1, pty).notice);
  EXPECT_FALSE(plan_relay(StepPlan{}, 1, pipes).relay);
}

TEST(StepPlan, WatchdogOnlyWithADir) {
  StepInputs in = step_inputs();
  in.diag = diag("hang=2m,hang-action=report");
  in.cfg.plugin.hang.cpu = true;
  in.cfg.plugin.hang.kill_grace_s = 3;
  StepPlan plan = plan_step(in);
  EXPECT_EQ(plan.hang.duration_s, 120);
  EXPECT_FALSE(plan.hang.kill);
  EXPECT_TRUE(plan.hang.cpu);
  EXPECT_EQ(plan.hang.kill_grace_s, 3);
  EXPECT_EQ(plan.hang.step, "12.3");
  EXPECT_EQ(plan.hang.state_dir, hang_state_dir(1000, "12.3"));
  EXPECT_EQ(plan.hang.diag_dir, "/home/u/run/gpudiag-12.3");
  EXPECT_EQ(plan.hang.host, "node0");
  EXPECT_EQ(plan.hang.rank, 1);
  EXPECT_EQ(env_of(plan.env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"), "/home/u/run/gpudiag-12.3/fr_pipe.rank");

  in.diag = diag("nccl=INFO");  // --diag without a watchdog: no pipe for one
  plan = plan_step(in);
  EXPECT_EQ(plan.hang.duration_s, 0);
  EXPECT_FALSE(env_of(plan.env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"));
  EXPECT_EQ(env_of(plan.env, "TORCH_FR_DUMP_TEMP_FILE"), "/home/u/run/gpudiag-12.3/fr_trace.rank");
}

TEST(StepPlan, StepsWithoutSrunTasksGetNothing) {
  for (std::uint32_t step : {0xfffffffbu, 0xfffffffcu, 0xfffffffau}) {
    SCOPED_TRACE(step);
    StepInputs in = step_inputs();
    in.ids.step_id = step;
    in.diag = diag("hang=1m,preflight,prefix");
    in.nccl_env = {{"NCCL_IB_HCA", "=mlx5_0"}};
    EXPECT_FALSE(step_runs_tasks(step));
    EXPECT_EQ(wanted_diag_dir(in), "");
    StepPlan plan = plan_step(in);
    EXPECT_FALSE(plan.fail);
    EXPECT_TRUE(plan.env.empty());
    EXPECT_FALSE(plan.preflight);
    EXPECT_FALSE(plan.tag);
    EXPECT_EQ(plan.hang.duration_s, 0);
    EXPECT_FALSE(plan_relay(plan, 0, {true, true, false, false}).relay);
  }
  EXPECT_TRUE(step_runs_tasks(0));
  EXPECT_TRUE(step_runs_tasks(3));
}

TEST(StepPlan, TorchAndTorchrunVariables) {
  StepInputs in = step_inputs();
  StepPlan plan = plan_step(in);
  EXPECT_EQ(env_of(plan.env, "RANK"), "1");
  EXPECT_EQ(env_of(plan.env, "WORLD_SIZE"), "4");
  EXPECT_EQ(env_of(plan.env, "LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env_of(plan.env, "MASTER_ADDR"), "node0");
  EXPECT_EQ(env_of(plan.env, "PET_NNODES"), "2");
  EXPECT_EQ(env_of(plan.env, "PET_NODE_RANK"), "0");
  EXPECT_EQ(env_of(plan.env, "PET_MASTER_ADDR"), "node0");
  EXPECT_EQ(env_of(plan.env, "PET_TEE"), "3");
  EXPECT_EQ(env_of(plan.env, "PET_MASTER_PORT"), env_of(plan.env, "MASTER_PORT"));

  struct Case {
    std::optional<std::string> cvd;
    int site_nproc;
    std::string nproc;
  };
  const std::vector<Case> cases = {
      {"0,1", 0, "2"},      {"0,1,2,3", 0, "4"}, {std::nullopt, 0, "1"}, {"NoDevFiles", 0, "1"},
      {"0,1,", 0, "2"},     {"0,1", 8, "8"},     {"", 0, "1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.cvd.value_or("(unset)"));
    in.env.cuda_visible_devices = c.cvd;
    in.cfg.plugin.nproc_per_node = c.site_nproc;
    EXPECT_EQ(env_of(plan_step(in).env, "PET_NPROC_PER_NODE"), c.nproc);
  }

  in = step_inputs();
  in.cfg.plugin.torchrun_env = false;
  plan = plan_step(in);
  EXPECT_TRUE(env_of(plan.env, "RANK"));
  EXPECT_FALSE(env_of(plan.env, "PET_NNODES"));
  // No nodelist, no master: neither set (a half-set torch env is worse than none).
  in = step_inputs();
  in.ids.master_addr.clear();
  plan = plan_step(in);
  EXPECT_FALSE(env_of(plan.env, "RANK"));
  EXPECT_FALSE(env_of(plan.env, "PET_NNODES"));
}

TEST(StepPlan, MasterIsTheStepsFirstNodelist) {
  TaskEnv e;
  EXPECT_EQ(master_nodelist(e), "");
  e.job_nodelist = "node[0-7]";
  EXPECT_EQ(master_nodelist(e), "node[0-7]");
  e.step_nodelist = "node[4-5]";
  EXPECT_EQ(master_nodelist(e), "node[4-5]");
}

TEST(StepPlan, ShortHostPrefersSlurmdsName) {
  EXPECT_EQ(short_host(std::string("node7.cluster"), "other.example"), "node7");
  EXPECT_EQ(short_host(std::nullopt, "other.example"), "other");
  EXPECT_EQ(short_host(std::string(""), "other"), "other");
}

TEST(StepPlan, EnvOrderAndTheSitesNcclDefaults) {
  StepInputs in = step_inputs();
  in.diag = diag("nccl=WARN,subsys=INIT+NET");
  in.nccl_env = {{"NCCL_IB_HCA", "=mlx5_0"}, {"NCCL_SOCKET_IFNAME", "=ib0"}};
  in.cfg.plugin.failfast.enabled = false;
  StepPlan plan = plan_step(in);
  std::vector<std::string> names;
  for (const auto& kv : plan.env) names.push_back(kv.first);
  const std::vector<std::string> want = {
      "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
      "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_TEE",
      "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "GPUDIAG_DIAG_DIR", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS",
      "NCCL_DEBUG_FILE", "TORCH_DISTRIBUTED_DEBUG"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(env_of(plan.env, "NCCL_DEBUG"), "WARN");
  EXPECT_EQ(env_of(plan.env, "NCCL_DEBUG_SUBSYS"), "INIT,NET");
  EXPECT_EQ(env_of(plan.env, "NCCL_DEBUG_FILE"), "/home/u/run/gpudiag-12.3/nccl.%h.%p.log");
}

TEST(StepPlan, NoValueThatApplyEnvWouldRefuse) {
  StepInputs in = step_inputs();
  in.diag = diag("nccl=INFO");
  in.env.submit_dir = "/home/u/run\n\x1b[31m";
  in.ids.master_addr = "node0\r";
  for (const auto& [name, value] : plan_step(in).env) EXPECT_TRUE(safe_env_value(value)) << name;
}

TEST(VisibleGpus, OneCountForThePlanAndThePreflight) {
  EXPECT_EQ(count_visible_gpus(std::nullopt), std::nullopt);
  EXPECT_EQ(count_visible_gpus(std::string("")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("NoDevFiles")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("0")), 1);
  EXPECT_EQ(count_visible_gpus(std::string("0,1,2,3")), 4);
  EXPECT_EQ(count_visible_gpus(std::string("GPU-8f1c,GPU-77aa")), 2);
  // Empty entries name no device (the plugin used to count commas: "0,1," was 3).
  EXPECT_EQ(count_visible_gpus(std::string("0,1,")), 2);
}

// What a real CUDA 13.0 counted on an H100 (driver 580.159.04; docs/BENCHMARKS.md): it
// stops at the first empty or malformed entry, and a repeated entry makes cuInit fail.
TEST(VisibleGpus, CountsAsARealCudaDoes) {
  EXPECT_EQ(count_visible_gpus(std::string(",0")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("0,,")), 1);
  EXPECT_EQ(count_visible_gpus(std::string(",0,,1")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("0,,1")), 1);
  // A UUID without its GPU- prefix: one that starts with a letter is no entry at all; one
  // that starts with digits is an index to CUDA ("35e0..." is GPU 35, absent there, which
  // only the node can tell).
  EXPECT_EQ(count_visible_gpus(std::string("e05b23c1-8a31-e67f-038b-f99e17abdfab")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("35e05b23-8a31-e67f-038b-f99e17abdfab")), 1);
  EXPECT_EQ(count_visible_gpus(std::string("GPU-35e05b23")), 1);  // a unique prefix is enough
  EXPECT_EQ(count_visible_gpus(std::string("0,0")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("GPU-35e05b23,GPU-35e05b23")), 0);
  EXPECT_EQ(count_visible_gpus(std::string("0,GPU-")), 1);
  EXPECT_EQ(count_visible_gpus(std::string("0,x,1")), 1);
}

// The rows adversary review 4 ran on the H100 (CUDA 13.0): an index is read as a number.
TEST(VisibleGpus, AnIndexIsANumberAsCudaReadsIt) {
  for (const char* one : {"00", "000", " 0", "0 ", "+0", "0a", "0x0", "0,-1", "0,GPU-zzzz"})
    EXPECT_EQ(count_visible_gpus(std::string(one)), 1) << one;
  for (const char* none : {"0,00", "00,0", "0, 0", "-1", "GPU-", "GPU-zzzz", "MIG-zzzz",
                           "GPU-0570c82a,GPU-0570c82a-9948-507c-167d-339452ddf1be",
                           "GPU-0570C82A-9948-507c-167d-339452ddf1be,GPU-0570c82a"})
    EXPECT_EQ(count_visible_gpus(std::string(none)), 0) << none;
  // An index and a UUID may name the same GPU; only the node knows (CUDA showed one here).
  EXPECT_EQ(count_visible_gpus(std::string("GPU-0570c82a-9948-507c-167d-339452ddf1be,0")), 2);
}

// A list as long as a value may be (8 KiB of distinct indices) is counted in n log n: root's
// slurmstepd counts once per local task (adversary review 4: 2.5 ms a call before).
TEST(VisibleGpus, ALongListIsCountedOnce) {
  std::string list;
  int n = 0;
  for (; list.size() < 8000; ++n) list += (n ? "," : "") + std::to_string(n);
  EXPECT_EQ(count_visible_gpus(list), n);
  EXPECT_EQ(count_visible_gpus(list + ",0"), 0);
  // Across the 64 entries counted in place (no allocation at a task's start) and beyond.
  for (int entries : {63, 64, 65, 130}) {
    std::string l;
    for (int i = 0; i < entries; ++i) l += (i ? "," : "") + std::to_string(i);
    EXPECT_EQ(count_visible_gpus(l), entries) << entries;
    EXPECT_EQ(count_visible_gpus(l + ",00"), 0) << entries;
    EXPECT_EQ(count_visible_gpus("0," + l.substr(2)), entries) << entries;
  }
}

// Slurm 26.05 can put GPU UUIDs in CUDA_VISIBLE_DEVICES instead of indices (full UUIDs,
// and MIG instances by their own UUIDs): one entry is one GPU, whatever its form.
TEST(VisibleGpus, UuidsCountAsIndicesDo) {
  EXPECT_EQ(count_visible_gpus(std::string("GPU-5b7d2c3e-9f1a-4c8b-a6d2-0e3f4a5b6c7d")), 1);
  EXPECT_EQ(count_visible_gpus(std::string("GPU-5b7d2c3e-9f1a-4c8b-a6d2-0e3f4a5b6c7d,"
                                           "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")),
            2);
  EXPECT_EQ(count_visible_gpus(std::string("MIG-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f6a7b8,"
                                           "MIG-8b7a6958-4e3d-2c1b-0a9f-8e7d6c5b4a39")),
            2);
}

// The plan from a step whose node shows its 4 GPUs by UUID: torchrun's processes per node
// come from the count, LOCAL_WORLD_SIZE stays the tasks on this node (Slurm's number).
TEST(StepPlan, UuidListGivesTheSameNprocPerNodeAsIndices) {
  StepInputs in = step_inputs();
  in.cfg.plugin.torchrun_env = true;
  in.cfg.plugin.torch_env = true;
  in.ids.local_world_size = 4;
  in.env.cuda_visible_devices = "0,1,2,3";
  const StepPlan by_index = plan_step(in);
  in.env.cuda_visible_devices =
      "GPU-5b7d2c3e-9f1a-4c8b-a6d2-0e3f4a5b6c7d,GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9,"
      "GPU-11111111-2222-3333-4444-555555555555,GPU-66666666-7777-8888-9999-aaaaaaaaaaaa";
  const StepPlan by_uuid = plan_step(in);
  EXPECT_EQ(env_of(by_uuid.env, "PET_NPROC_PER_NODE"), "4");
  EXPECT_EQ(env_of(by_uuid.env, "LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(env_of(by_uuid.env, "PET_NPROC_PER_NODE"), env_of(by_index.env, "PET_NPROC_PER_NODE"));
  EXPECT_EQ(env_of(by_uuid.env, "LOCAL_WORLD_SIZE"), env_of(by_index.env, "LOCAL_WORLD_SIZE"));
}

namespace {

// Gloo binds to the address its host name resolves to, and to loopback where it resolves
// nowhere: the plan names the interface that reached MASTER_ADDR in the rendezvous check.
TEST(StepPlan, GlooUsesTheInterfaceThatReachesMasterAddr) {
  StepInputs in = step_inputs();
  EXPECT_FALSE(env_of(plan_step(in).env, "GLOO_SOCKET_IFNAME"));  // nothing checked: nothing set
  RendezvousFacts f;
  f.target.var = "MASTER_ADDR";
  f.target.host = "node0";
  f.addresses = {"10.0.0.1"};
  f.local_interface = "eth1";
  in.rendezvous = {f};
  EXPECT_EQ(env_of(plan_step(in).env, "GLOO_SOCKET_IFNAME"), "eth1");
  in.cfg.plugin.torch_env = false;
  in.cfg.plugin.torchrun_env = false;
  EXPECT_FALSE(env_of(plan_step(in).env, "GLOO_SOCKET_IFNAME"));
}

}  // namespace
