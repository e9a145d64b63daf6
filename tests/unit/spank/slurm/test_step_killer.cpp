// A task gpudiag refuses ends the step on every node (issues 22 and 17.5): the refusal
// crosses fork through the shared page, and the stepd ends its own step once, after the
// node's output is out unless a task of the node already runs the program.
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

constexpr auto kReaped = StepKiller::Moment::kTaskReaped;
constexpr auto kDone = StepKiller::Moment::kNodeDone;

// A forked task, as slurmstepd makes one; it refuses or passes (task_init), then exits.
// Returns its exit code: 2 when it passed but learnt that another task was refused.
int run_task(StepKiller& k, bool refuse) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (refuse) {
      k.mark_refused();
      ::_exit(1);
    }
    ::_exit(k.mark_started() ? 0 : 2);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
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
  ASSERT_EQ(run_task(k, true), 1);
  ASSERT_EQ(run_task(k, true), 1);
  // No task of the node runs the program: the refusal's text may still be on its way to
  // srun, which stops reading once the step is cancelled. So nothing as tasks are reaped.
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
  // Slurmstepd has sent the node's output: now, once.
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  ASSERT_EQ(g_ended.size(), 1u);
  EXPECT_EQ(g_ended[0], std::make_pair(12u, 3u));
}

TEST_F(StepKillerTest, ARefusalBesideATaskRunningTheProgramEndsTheStepAsItIsReaped) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  ASSERT_EQ(run_task(k, false), 0);  // started the program: it waits for the refused rank
  ASSERT_EQ(run_task(k, true), 1);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  ASSERT_EQ(g_ended.size(), 1u);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);  // no second RPC
  EXPECT_EQ(g_ended.size(), 1u);
}

TEST_F(StepKillerTest, ATaskThatPassesAfterARefusalOnItsNodeIsRefusedToo) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  ASSERT_EQ(run_task(k, true), 1);
  EXPECT_EQ(run_task(k, false), 2);  // the step is ending: it does not start the program
  // It counted itself before it looked, so the stepd may end the step at once; either
  // moment ends it exactly once.
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  EXPECT_EQ(g_ended.size(), 1u);
}

TEST(EndStepNow, OnlyARefusalEndsTheStepAndItWaitsForTheNodeUnlessATaskRuns) {
  EXPECT_FALSE(end_step_now(false, false, kReaped));
  EXPECT_FALSE(end_step_now(false, true, kReaped));
  EXPECT_FALSE(end_step_now(false, false, kDone));
  EXPECT_FALSE(end_step_now(false, true, kDone));
  EXPECT_FALSE(end_step_now(true, false, kReaped));
  EXPECT_TRUE(end_step_now(true, true, kReaped));
  EXPECT_TRUE(end_step_now(true, false, kDone));
  EXPECT_TRUE(end_step_now(true, true, kDone));
}

TEST_F(StepKillerTest, TasksThatPassLeaveTheStepAlone) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  ASSERT_EQ(run_task(k, false), 0);
  ASSERT_EQ(run_task(k, false), 0);
  EXPECT_EQ(k.end_if_refused(12, 3, "n1", kReaped), std::nullopt);
  EXPECT_EQ(k.end_if_refused(12, 3, "n1", kDone), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
  EXPECT_EQ(k.fallback_hint(), "");
}

TEST_F(StepKillerTest, AFailedEndIsAMessageNamingStepNodeAndTheFix) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  g_answer = "Access/permission denied";
  ASSERT_EQ(run_task(k, true), 1);
  auto err = k.end_if_refused(12, 3, "n2", kDone);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->rfind("gpudiag: ", 0), 0u) << *err;
  EXPECT_NE(err->find("step 12.3"), std::string::npos) << *err;
  EXPECT_NE(err->find("on n2"), std::string::npos) << *err;
  EXPECT_NE(err->find("Access/permission denied"), std::string::npos) << *err;
  EXPECT_NE(err->find("--kill-on-bad-exit"), std::string::npos) << *err;
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);  // said once
}

TEST_F(StepKillerTest, WithoutAWayToEndTheStepTheRefusalSaysSo) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(nullptr));
  ASSERT_EQ(run_task(k, true), 1);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
  EXPECT_NE(k.fallback_hint().find("--kill-on-bad-exit"), std::string::npos);
}

TEST_F(StepKillerTest, UnpreparedKillerDoesNothing) {
  StepKiller k;  // user_init did not run (no step with tasks)
  k.mark_refused();
  EXPECT_TRUE(k.mark_started());
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
}
