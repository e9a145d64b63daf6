// The task's environment (env_writer): never override the user, the injected record.
#include <gtest/gtest.h>

#include "spank/plan/env_writer.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

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
  // Issue 21 A10: a C1 control (U+009B CSI) is refused, as util's rule refuses it in a line.
  EXPECT_FALSE(safe_env_value("run\xc2\x9b" "31m"));
  EXPECT_FALSE(safe_env_value("run\x9b" "31m"));  // issue 30 (1d): a lone 8-bit C1 byte too
}

namespace {
// Counts what apply_env sets.
struct CountingEnv : MapEnv {
  std::vector<std::string> sets;
  bool set(const std::string& n, const std::string& v) override {
    sets.push_back(n);
    return MapEnv::set(n, v);
  }
};
}  // namespace

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
