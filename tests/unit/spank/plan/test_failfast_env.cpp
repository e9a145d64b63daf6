// Fail-fast variables for torch and NCCL (failfast_env): the site's values, old and new
// torch names, and the user's value under either name.
#include <gtest/gtest.h>

#include <map>

#include "spank/plan/env_writer.h"
#include "spank/plan/failfast_env.h"
#include "tests/unit/spank/plan/plan_env.h"

using namespace gpudiag;
using namespace gpudiag::test;

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

// A user's value too long for slurmstepd to read stays where the user put it; the other
// name gets nothing, never the stand-in the read returns (adversary review 5).
TEST(FailFast, AValueTooLongToReadIsNeverCopied) {
  FailFastSettings f;
  MapEnv task;  // as SpankEnv reads a variable over 8 KiB
  task.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = std::string(kUnreadableValue);
  apply_env(task, failfast_env(f, "/d", false, &task));
  EXPECT_EQ(task.vars.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);
  EXPECT_EQ(task.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"], kUnreadableValue);  // untouched
  EXPECT_EQ(task.vars["TORCH_NCCL_DUMP_ON_TIMEOUT"], "1");  // the others as before
}
