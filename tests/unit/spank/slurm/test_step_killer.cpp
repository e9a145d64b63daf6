// A task gpudiag refuses ends the step on every node (issues 22 and 17.5): the refusal
// crosses fork through the shared page, and the stepd ends its own step once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spank/slurm/step_killer.h"

using namespace gpudiag;

namespace {

std::vector<std::pair<std::uint32_t, std::uint32_t>> g_ended;
std::string g_answer;

std::string record_end(std::uint32_t job, std::uint32_t step) {
  g_ended.emplace_back(job, step);
  return g_answer;
}

// A forked task, as slurmstepd makes one; it refuses or passes, then exits.
void run_task(StepKiller& k, bool refuse) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (refuse) k.mark_refused();
    ::_exit(refuse ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
}

class StepKillerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ended.clear();
    g_answer.clear();
  }
};

}  // namespace

TEST_F(StepKillerTest, ARefusedTaskInAForkedChildEndsTheStepOnce) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  run_task(k, true);
  run_task(k, true);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2"), std::nullopt);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2"), std::nullopt);  // the second reaped task: no second RPC
  ASSERT_EQ(g_ended.size(), 1u);
  EXPECT_EQ(g_ended[0], std::make_pair(12u, 3u));
}

TEST_F(StepKillerTest, TasksThatPassLeaveTheStepAlone) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  run_task(k, false);
  run_task(k, false);
  EXPECT_EQ(k.end_if_refused(12, 3, "n1"), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
  EXPECT_EQ(k.fallback_hint(), "");
}

TEST_F(StepKillerTest, AFailedEndIsAMessageNamingStepNodeAndTheFix) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  g_answer = "Access/permission denied";
  run_task(k, true);
  auto err = k.end_if_refused(12, 3, "n2");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->rfind("gpudiag: ", 0), 0u) << *err;
  EXPECT_NE(err->find("step 12.3"), std::string::npos) << *err;
  EXPECT_NE(err->find("on n2"), std::string::npos) << *err;
  EXPECT_NE(err->find("Access/permission denied"), std::string::npos) << *err;
  EXPECT_NE(err->find("--kill-on-bad-exit"), std::string::npos) << *err;
  EXPECT_EQ(k.end_if_refused(12, 3, "n2"), std::nullopt);  // said once
}

TEST_F(StepKillerTest, WithoutAWayToEndTheStepTheRefusalSaysSo) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(nullptr));
  run_task(k, true);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2"), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
  EXPECT_NE(k.fallback_hint().find("--kill-on-bad-exit"), std::string::npos);
}

TEST_F(StepKillerTest, UnpreparedKillerDoesNothing) {
  StepKiller k;  // user_init did not run (no step with tasks)
  k.mark_refused();
  EXPECT_EQ(k.end_if_refused(12, 3, "n2"), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
}
