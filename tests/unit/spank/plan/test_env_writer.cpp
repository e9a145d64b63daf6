#include <gtest/gtest.h>

#include <map>

#include "spank/plan/diag_options.h"
#include "spank/plan/dist_env.h"
#include "spank/plan/env_writer.h"
#include "spank/plan/failfast_env.h"
#include "spank/plan/nccl_defaults.h"
#include "spank/slurm/plugin_args.h"
#include "spank/plan/port_salt.h"
#include "spank/plan/step_plan.h"

using namespace gpudiag;

TEST(DiagList, BareDiagTurnsOnDefaults) {
  auto d = parse_diag_list("");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->enabled);
  EXPECT_EQ(d->nccl_level, "INFO");
  EXPECT_EQ(d->nccl_subsys, "INIT,NET,ENV");
  EXPECT_FALSE(d->prefix);
}

TEST(DiagList, Items) {
  auto d = parse_diag_list("nccl=trace,subsys=INIT+COLL+^PROXY,noprefix,dir=/scratch/me/diag");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->nccl_level, "TRACE");
  EXPECT_EQ(d->nccl_subsys, "INIT,COLL,^PROXY");
  EXPECT_EQ(d->prefix, false);
  EXPECT_EQ(d->dir, "/scratch/me/diag");
}

TEST(DiagList, OptionOverridesEnvItemByItem) {
  auto env = parse_diag_list("nccl=warn,noprefix");
  auto both = parse_diag_list("nccl=trace", *env);
  EXPECT_EQ(both->nccl_level, "TRACE");
  EXPECT_EQ(both->prefix, false);
}

TEST(DiagList, ErrorsAreClear) {
  auto d = parse_diag_list("foo");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().rfind("gpudiag: --diag: unknown item 'foo' (known: ", 0), 0u);
  EXPECT_FALSE(parse_diag_list("nccl=LOUD"));
  EXPECT_FALSE(parse_diag_list("dir=relative/path"));
  EXPECT_FALSE(parse_diag_list("noprefix=1"));
  EXPECT_FALSE(parse_diag_list("subsys=INIT;rm"));
  EXPECT_FALSE(parse_diag_list("dir=/tmp/x\nLD_PRELOAD=/evil"));
  EXPECT_FALSE(parse_diag_list("hang=soon"));
  EXPECT_FALSE(parse_diag_list("hang"));
  EXPECT_FALSE(parse_diag_list("hang=-5s"));
  EXPECT_FALSE(parse_diag_list("hang=0.1s"));
  EXPECT_FALSE(parse_diag_list("hang-action=explode"));
  EXPECT_FALSE(parse_diag_list("preflight=yes"));
}

TEST(DiagList, HelpAndErrorsListEveryItemFromTheParsersTable) {
  const std::string items = diag_items_list();
  for (const char* item : {"nccl=LEVEL", "subsys=A+B", "dir=PATH", "noprefix", "prefix", "hang=DURATION",
                           "hang-action=kill|report", "preflight", "nopreflight"})
    EXPECT_NE(items.find(item), std::string::npos) << item;
  EXPECT_NE(diag_option_help().find(items), std::string::npos);
  EXPECT_NE(parse_diag_list("x").error().find("(known: " + items + ")"), std::string::npos);
}

// slurmstepd reads GPUDIAG_DIAG through an 8 KiB buffer: srun refuses more (issue 21.3).
TEST(DiagList, LongerThanSlurmstepdCanReadIsRefused) {
  std::string dir = "dir=/" + std::string(kMaxDiagListBytes - 5, 'a');
  ASSERT_EQ(dir.size(), kMaxDiagListBytes);
  EXPECT_TRUE(parse_diag_list(dir));
  auto r = parse_diag_list(dir + "b");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "gpudiag: --diag: the list is 8192 bytes long, more than the 8191 that slurmstepd can read on "
                       "the nodes: shorten it");
}

TEST(DiagList, HangAndPreflight) {
  auto d = parse_diag_list("hang=10m,hang-action=report,preflight");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->hang_s, 600);
  EXPECT_EQ(d->hang_action, "report");
  EXPECT_EQ(d->preflight, true);
  EXPECT_EQ(parse_diag_list("hang=20s")->hang_s, 20);
  EXPECT_EQ(parse_diag_list("hang=off")->hang_s, 0);
  EXPECT_EQ(parse_diag_list("nopreflight")->preflight, false);
  EXPECT_FALSE(parse_diag_list("")->hang_s);
}

TEST(FailFast, SiteDefaultsAndDumpFilesInTheDiagDir) {
  FailFastSettings f;
  f.heartbeat_timeout_s = 300;
  f.rdzv_join_timeout_s = 120;
  f.nccl_ib_retry_cnt = 7;
  auto env = failfast_env(f, "/home/u/gpudiag-5.0", true);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(m["TORCH_NCCL_DUMP_ON_TIMEOUT"], "1");
  EXPECT_EQ(m["TORCH_FR_BUFFER_SIZE"], "2000");
  EXPECT_EQ(m["TORCH_NCCL_TRACE_BUFFER_SIZE"], "2000");
  EXPECT_EQ(m["TORCH_FR_DUMP_TEMP_FILE"], "/home/u/gpudiag-5.0/fr_trace.rank");
  EXPECT_EQ(m["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"], "/home/u/gpudiag-5.0/fr_trace.rank");
  EXPECT_EQ(m["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], "/home/u/gpudiag-5.0/fr_pipe.rank");
  EXPECT_EQ(m["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"], "300");
  EXPECT_EQ(m["PET_RDZV_CONF"], "join_timeout=120");
  EXPECT_EQ(m["NCCL_IB_RETRY_CNT"], "7");
  EXPECT_EQ(m.count("NCCL_IB_TIMEOUT"), 0u);
  EXPECT_EQ(m.count("DEEPSPEED_TIMEOUT"), 0u);
  // Without a diag dir there is nowhere to dump; off means nothing at all.
  auto bare = failfast_env(f, "", false);
  for (auto& [k, v] : bare) EXPECT_EQ(k.find("FILE"), std::string::npos) << k;
  f.enabled = false;
  EXPECT_TRUE(failfast_env(f, "/d", true).empty());
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

TEST(PortSalt, OnlySixteenLowercaseHexDigitsAreASalt) {
  EXPECT_EQ(parse_port_salt(std::string("0123456789abcdef")), 0x0123456789abcdefull);
  EXPECT_EQ(parse_port_salt(std::string("ffffffffffffffff")), ~0ull);
  for (const char* bad : {"", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF", "0123456789abcdeg",
                          " 123456789abcdef", "-123456789abcdef"})
    EXPECT_EQ(parse_port_salt(std::string(bad)), 0u) << bad;
  EXPECT_EQ(parse_port_salt(std::nullopt), 0u);
  auto made = new_port_salt();
  ASSERT_TRUE(made);
  EXPECT_EQ(made->size(), 16u);
  EXPECT_NE(parse_port_salt(made), 0u);  // 1 in 2^64 to be zero
  EXPECT_NE(*made, *new_port_salt());
}

// The salt keys a permutation: every index lands on exactly one port, for any span.
TEST(PortSalt, ThePermutationIsABijectionOfTheRange) {
  for (std::uint64_t span : {1ull, 2ull, 3ull, 7ull, 4536ull, 65536ull})
    for (std::uint64_t salt : {1ull, 0x0123456789abcdefull, ~0ull}) {
      std::vector<bool> hit(span, false);
      for (std::uint64_t i = 0; i < span; ++i) {
        const std::uint64_t p = permute_port_index(i, span, salt);
        ASSERT_LT(p, span) << span;
        ASSERT_FALSE(hit[p]) << "span " << span << " salt " << salt << " index " << i;
        hit[p] = true;
      }
    }
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

namespace {
struct MapEnv : EnvTarget {
  std::map<std::string, std::string> vars;
  std::optional<std::string> get(const std::string& n) override {
    auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  bool set(const std::string& n, const std::string& v) override {
    vars[n] = v;
    return true;
  }
};
}  // namespace

TEST(EnvWriter, NeverOverridesTheUser) {
  MapEnv env;
  env.vars["MASTER_PORT"] = "12345";
  auto kept = apply_env(env, {{"MASTER_PORT", "61001"}, {"RANK", "0"}});
  EXPECT_EQ(env.vars["MASTER_PORT"], "12345");
  EXPECT_EQ(env.vars["RANK"], "0");
  EXPECT_EQ(kept, std::vector<std::string>{"MASTER_PORT"});
  EXPECT_EQ(env.vars[kInjectedVar], "RANK:" + injected_value_tag("0"));
}

TEST(EnvWriter, ReplacesWhatAnOuterStepInjected) {
  MapEnv env;
  apply_env(env, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  env.vars["MASTER_PORT"] = "12345";  // the user's, set between the two steps
  apply_env(env, {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "61001"}});
  EXPECT_EQ(env.vars["RANK"], "2");
  EXPECT_EQ(env.vars["WORLD_SIZE"], "4");
  EXPECT_EQ(env.vars["MASTER_PORT"], "12345");
  EXPECT_EQ(env.vars[kInjectedVar], "RANK:" + injected_value_tag("2") + ",WORLD_SIZE:" + injected_value_tag("4"));
}

// issue 21.7: `export NCCL_SOCKET_IFNAME=eth0` inside a step, then a nested srun.
TEST(EnvWriter, KeepsAValueTheUserChangedAfterTheOuterStep) {
  MapEnv env;
  apply_env(env, {{"NCCL_SOCKET_IFNAME", "^docker,lo"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}, {"RANK", "0"}});
  env.vars["NCCL_SOCKET_IFNAME"] = "eth0";
  env.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0";
  auto kept = apply_env(env, {{"NCCL_SOCKET_IFNAME", "^docker,lo"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                              {"RANK", "3"}});
  EXPECT_EQ(env.vars["NCCL_SOCKET_IFNAME"], "eth0");
  EXPECT_EQ(env.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env.vars["RANK"], "3");
  EXPECT_EQ(kept, (std::vector<std::string>{"NCCL_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}));
  // Now the user's: a third step leaves them alone too.
  EXPECT_EQ(env.vars[kInjectedVar], "RANK:" + injected_value_tag("3"));
}

TEST(EnvWriter, InjectedRecord) {
  EXPECT_EQ(injected_value_tag("0").size(), 8u);
  EXPECT_NE(injected_value_tag("0"), injected_value_tag("1"));
  EXPECT_EQ(parse_injected(format_injected({{"A", "0000abcd"}, {"B", "12345678"}})),
            (InjectedRecord{{"A", "0000abcd"}, {"B", "12345678"}}));
  // A names-only record (older versions) proves nothing about a value: the user's.
  EXPECT_TRUE(parse_injected("RANK,WORLD_SIZE").empty());
  EXPECT_TRUE(parse_injected("").empty());
  MapEnv env;
  env.vars[kInjectedVar] = "RANK";
  env.vars["RANK"] = "0";
  apply_env(env, {{"RANK", "4"}});
  EXPECT_EQ(env.vars["RANK"], "0");
}

TEST(EnvWriter, ControlBytesNeverReachTheTask) {
  MapEnv env;
  apply_env(env, {{"NCCL_SOCKET_IFNAME", "eth0\nLD_PRELOAD=/x"}});
  EXPECT_EQ(env.vars.count("NCCL_SOCKET_IFNAME"), 0u);
}

TEST(PluginArgs, Strict) {
  EXPECT_TRUE(parse_plugin_args({}));
  auto a = parse_plugin_args({"config=/etc/gpudiag/site.yaml"});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->config, "/etc/gpudiag/site.yaml");
  EXPECT_NE(parse_plugin_args({"cfg=/x"}).error().find("unknown plugstack argument 'cfg'"), std::string::npos);
  EXPECT_FALSE(parse_plugin_args({"config"}));
  EXPECT_FALSE(parse_plugin_args({"config=relative.yaml"}));
}

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

// torch <= 2.1 (Debian 12's 1.13 among them) reads only the pre-2.2 names.
TEST(FailFast, OldTorchNamesBesideTheNewOnes) {
  FailFastSettings f;
  auto env = failfast_env(f, "/d", false);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(m["NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(old_torch_name("TORCH_NCCL_BLOCKING_WAIT"), "NCCL_BLOCKING_WAIT");
  EXPECT_EQ(old_torch_name("TORCH_NCCL_DESYNC_DEBUG"), "NCCL_DESYNC_DEBUG");
  EXPECT_EQ(old_torch_name("TORCH_NCCL_ENABLE_TIMING"), "NCCL_ENABLE_TIMING");
  // Names that came with 2.2 or later have no old form.
  EXPECT_EQ(old_torch_name("TORCH_NCCL_DUMP_ON_TIMEOUT"), "");
  EXPECT_EQ(old_torch_name("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"), "");
  for (const auto& [k, v] : env) EXPECT_NE(k, "NCCL_DUMP_ON_TIMEOUT");
}

TEST(FailFast, UserValueUnderEitherNameWinsForBoth) {
  FailFastSettings f;
  for (const char* user_name : {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}) {
    MapEnv task;
    task.vars[user_name] = "0";
    apply_env(task, failfast_env(f, "/d", false, &task));
    EXPECT_EQ(task.vars["NCCL_ASYNC_ERROR_HANDLING"], "0") << user_name;
    EXPECT_EQ(task.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0") << user_name;
  }
  // What the plugin itself set for the batch step is not the user's: a step inside
  // the batch script gets the defaults again.
  MapEnv batch;
  batch.vars["NCCL_ASYNC_ERROR_HANDLING"] = "1";
  batch.vars[kInjectedVar] = "NCCL_ASYNC_ERROR_HANDLING:" + injected_value_tag("1");
  apply_env(batch, failfast_env(f, "/d", false, &batch));
  EXPECT_EQ(batch.vars["NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(batch.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
}
