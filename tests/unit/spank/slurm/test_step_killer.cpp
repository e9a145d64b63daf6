// A task gpudiag refuses ends the step on every node (issues 22 and 17.5): the refusal
// crosses fork through the shared page, and the stepd ends its own step once, after the
// node's output is out unless a task of the node already runs the program.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
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
int run_task(StepKiller& k, bool refuse, int local_id = 0) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (refuse) {
      k.mark_refused();
      ::_exit(1);
    }
    ::_exit(k.mark_running(local_id) ? 0 : 2);
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
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_EQ(run_task(k, false), 2);  // the step is ending: it does not start the program
  // Nor does it count as running (adversary 13): the cancel still waits for the node's
  // output.
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
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
  EXPECT_TRUE(k.mark_running(0));
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
}

// ---------------------------------------------------------------------------------------
// Adversary review 13 (of b7fb983): the count and the flag as slurmstepd's tasks meet them.

namespace {

// A forked task that waits until the parent closes `go` before it acts, so that siblings
// race. kRefuse: refused in its plan; kPass: exit 0 if it may start the program, 2 if it
// learnt of a refusal; kWaitThenGiveUp: counted as running, waits `hold_ms` for other
// nodes (the preflight barrier), then gives up and is refused (2 if it never waited).
enum Role { kRefuse, kPass, kWaitThenGiveUp };
pid_t fork_task(StepKiller& k, const int go[2], Role role, int local_id, int hold_ms = 0) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::close(go[1]);
  char c;
  while (::read(go[0], &c, 1) < 0) {
  }
  switch (role) {
    case kRefuse:
      k.mark_refused();
      ::_exit(1);
    case kPass:
      ::_exit(k.mark_running(local_id) ? 0 : 2);
    case kWaitThenGiveUp:
      if (!k.mark_running(local_id)) ::_exit(2);
      ::usleep(static_cast<useconds_t>(hold_ms) * 1000);
      k.unmark_running();
      k.mark_refused();
      ::_exit(1);
  }
  ::_exit(3);
}

int reap(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

// Attack that failed: count-then-look across fork, one word. Whenever the passing task
// was let start the program, slurmstepd ends the step as it reaps the refused task.
TEST_F(StepKillerTest, Adv13_NoInterleavingLetsAProgramRunBesideAnUnendedRefusal) {
  int ran = 0, refused_too = 0;
  for (int round = 0; round < 3000; ++round) {
    g_ended.clear();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    const pid_t passer = fork_task(k, go, kPass, 1);
    const pid_t refuser = fork_task(k, go, kRefuse, 0);
    ASSERT_GT(passer, 0);
    ASSERT_GT(refuser, 0);
    ::close(go[1]);
    ::close(go[0]);
    ASSERT_EQ(reap(refuser), 1);
    k.end_if_refused(1, 2, "n", kReaped);
    const bool ended_at_reap = !g_ended.empty();
    const int p = reap(passer);
    ASSERT_TRUE(p == 0 || p == 2) << p;
    if (p == 0) {
      ++ran;
      ASSERT_TRUE(ended_at_reap) << "round " << round << ": the program ran and the refusal was not acted on";
    } else {
      ++refused_too;
    }
    k.end_if_refused(1, 2, "n", kDone);
    ASSERT_EQ(g_ended.size(), 1u);  // always ended, once
  }
  EXPECT_GT(ran + refused_too, 0);
  RecordProperty("ran", ran);
  RecordProperty("refused_too", refused_too);
}

// Was a break: under --diag=preflight a sibling that passed its plan waits at the barrier
// for srun's verdict, which never comes (the refused task never reported). The cancel
// waited for slurm_spank_exit, so for that sibling to give up: 60 s in a real step. A
// task waiting for other nodes counts as running, so the refusal ends the step at once.
TEST_F(StepKillerTest, Adv13_ARefusalBesideASiblingWaitingAtTheBarrierEndsTheStepAtOnce) {
  for (int round = 0; round < 20; ++round) {
    g_ended.clear();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    const pid_t at_barrier = fork_task(k, go, kWaitThenGiveUp, 1, 300);
    const pid_t refused = fork_task(k, go, kRefuse, 0);
    ::close(go[1]);
    ::close(go[0]);
    ASSERT_EQ(reap(refused), 1);
    k.end_if_refused(12, 3, "n2", kReaped);
    const bool ended_at_reap = !g_ended.empty();
    const int sibling = reap(at_barrier);
    // Either it waited and the refusal ended the step at once, or it saw the refusal
    // first and never waited.
    EXPECT_TRUE(ended_at_reap || sibling == 2) << "round " << round;
    k.end_if_refused(12, 3, "n2", kDone);
    EXPECT_EQ(g_ended.size(), 1u);
  }
}

// A task that waited for other nodes and was stopped (srun's verdict) no longer counts:
// the refusal of its node still waits for the node's output.
TEST_F(StepKillerTest, ATaskThatStoppedWaitingNoLongerCounts) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  EXPECT_TRUE(k.mark_running(0));
  EXPECT_TRUE(k.mark_running(0));  // counted once
  k.unmark_running();
  k.unmark_running();  // and taken back once
  ASSERT_EQ(run_task(k, true), 1);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_TRUE(g_ended.empty());
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kDone), std::nullopt);
  EXPECT_EQ(g_ended.size(), 1u);
}

// ---------------------------------------------------------------------------------------
// Adversary review 14 (of 7fa3500).

// Attack that failed: refuse_task takes the task out of the count and sets the refusal in
// two steps (unmark_running, then mark_refused). A sibling that counts itself in between
// sees no refusal and goes on; but it is then counted when the refused task is reaped, so
// the step still ends at once. 500 raced rounds.
TEST_F(StepKillerTest, Adv14_AttackFailed_TheGapBetweenUnmarkAndRefusalLetsNoProgramRunUnended) {
  for (int round = 0; round < 500; ++round) {
    g_ended.clear();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    // The refused task: counted (it waited at the barrier), then gives up as refuse_task does.
    const pid_t refused = ::fork();
    if (refused == 0) {
      if (!k.mark_running(0)) ::_exit(3);
      ::close(go[1]);
      char c;
      while (::read(go[0], &c, 1) < 0) {
      }
      k.unmark_running();
      k.mark_refused();
      ::_exit(1);
    }
    const pid_t passer = fork_task(k, go, kPass, 1);
    ::close(go[1]);
    ::close(go[0]);
    ASSERT_EQ(reap(refused), 1);
    k.task_reaped(0);
    k.end_if_refused(1, 2, "n", kReaped);
    const bool ended_at_reap = !g_ended.empty();
    const int p = reap(passer);
    ASSERT_TRUE(p == 0 || p == 2) << p;
    if (p == 0) {
      ASSERT_TRUE(ended_at_reap) << "round " << round;
    }
    k.end_if_refused(1, 2, "n", kDone);
    ASSERT_EQ(g_ended.size(), 1u);
  }
}

// Was a break (low): the count was never taken back when a counted task was reaped, so a
// sibling whose short program had already ended still "ran": the refusal was cancelled
// as it was reaped, before the node's output was out.
TEST_F(StepKillerTest, Adv14_ASiblingWhoseProgramEndedAlreadyDoesNotCountAsRunning) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  ASSERT_EQ(run_task(k, false, 1), 0);  // counted, ran its program, exited
  k.task_reaped(1);                     // and slurmstepd reaped it
  ASSERT_EQ(run_task(k, true, 0), 1);   // then the refused task
  k.task_reaped(0);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_TRUE(g_ended.empty()) << "cancelled at the refused task's reap, though no task of the node runs";
  k.end_if_refused(12, 3, "n2", kDone);
  EXPECT_EQ(g_ended.size(), 1u);
}

// A task past the page's slots is counted until the step ends, as if its program ran on:
// a refusal beside it ends the step at once, never later.
TEST_F(StepKillerTest, ATaskPastTheSlotsCountsUntilTheStepEnds) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  ASSERT_EQ(run_task(k, false, 100000), 0);
  k.task_reaped(100000);
  ASSERT_EQ(run_task(k, true, 0), 1);
  k.task_reaped(0);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_EQ(g_ended.size(), 1u);
}

// Was a break (medium): under --diag=preflight every task counted itself before its own
// checks, so a node that fails them (every task does; none waits for the verdict) was
// cancelled as its task 0 was reaped while a sibling still checked: the line b7fb983 was
// made to keep could be lost again. A task counts from its checks on only when it will
// wait for other nodes: it passed them, or the fabric test (every task takes part) comes.
TEST(WaitsForOtherNodes, OnlyATaskThatPassedOrTakesPartInTheFabricTestWaits) {
  EXPECT_FALSE(waits_for_other_nodes(false, false));
  EXPECT_TRUE(waits_for_other_nodes(true, false));
  EXPECT_TRUE(waits_for_other_nodes(false, true));
  EXPECT_TRUE(waits_for_other_nodes(true, true));
}

// Every cancel waits the grace, so that srun prints the refusal's line first: at exit,
// and as a refused task is reaped beside a running one (adversary review 16).
TEST_F(StepKillerTest, EveryCancelWaitsTheGrace) {
  for (bool running : {false, true}) {
    g_ended.clear();
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end, 0.2));
    if (running) {
      ASSERT_EQ(run_task(k, false, 1), 0);
    }
    ASSERT_EQ(run_task(k, true, 0), 1);
    k.task_reaped(0);
    const auto t0 = std::chrono::steady_clock::now();
    k.end_if_refused(12, 3, "n2", running ? kReaped : kDone);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(g_ended.size(), 1u);
    EXPECT_GE(took, 0.19) << (running ? "as the task is reaped" : "at exit");
  }
}

// ---------------------------------------------------------------------------------------
// Adversary review 15 (of ca4eb81): the slots.

// Attack that failed: slurmstepd reaps a task that never counted (refused before it
// counted; an id out of range; -1; the same id twice): a sibling still waiting at the
// barrier stays counted, so a refusal beside it ends the step as it is reaped.
TEST_F(StepKillerTest, Adv15_AttackFailed_AReapOfATaskThatNeverCountedKeepsASiblingCounted) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  // Task 1 counts itself and waits for other nodes.
  const pid_t waiting = ::fork();
  if (waiting == 0) {
    if (!k.mark_running(1)) ::_exit(2);
    ::close(go[1]);
    char c;
    while (::read(go[0], &c, 1) < 0) {
    }
    ::_exit(0);
  }
  ::usleep(100 * 1000);  // it has counted itself
  for (int id : {0, -1, static_cast<int>(StepKiller::kTaskSlots) - 1, static_cast<int>(StepKiller::kTaskSlots),
                 100000, 0, 2})
    k.task_reaped(id);
  ASSERT_EQ(run_task(k, true, 0), 1);  // task 0 refused, never counted
  k.task_reaped(0);
  k.task_reaped(0);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_EQ(g_ended.size(), 1u) << "the sibling at the barrier no longer counted: the cancel waits for it";
  ::close(go[1]);
  ::close(go[0]);
  ASSERT_EQ(reap(waiting), 0);
  k.task_reaped(1);
}

// Attack that failed: a counted task's slot is taken back once, whether the task gave up
// (unmark_running) or slurmstepd reaped it, and in either order the count never drops
// below the tasks that still run (no double decrement, no wrap of the word).
TEST_F(StepKillerTest, Adv15_AttackFailed_UnmarkThenReapTakesTheTaskOutOnce) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t stays = ::fork();  // task 2 runs the program throughout
  if (stays == 0) {
    if (!k.mark_running(2)) ::_exit(2);
    ::close(go[1]);
    char c;
    while (::read(go[0], &c, 1) < 0) {
    }
    ::_exit(0);
  }
  ::usleep(100 * 1000);
  const pid_t gives_up = ::fork();  // task 1 counted, then refused after all
  if (gives_up == 0) {
    if (!k.mark_running(1)) ::_exit(2);
    k.unmark_running();
    ::_exit(0);
  }
  ASSERT_EQ(reap(gives_up), 0);
  k.task_reaped(1);
  k.task_reaped(1);
  ASSERT_EQ(run_task(k, true, 0), 1);
  k.task_reaped(0);
  EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  EXPECT_EQ(g_ended.size(), 1u) << "task 2 still runs, but the count says none does";
  ::close(go[1]);
  ::close(go[0]);
  ASSERT_EQ(reap(stays), 0);
}

// A check that fails: the node's first task to find a problem says it, whichever it is,
// and once; a second problem is said too.
TEST_F(StepKillerTest, TheNodesFirstTaskToFindAProblemSaysItAndOnlyIt) {
  for (int tasks : {1, 4}) {
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    int said = 0;
    for (int id = 1; id <= tasks; ++id) {  // local task 0 passes; 1 .. tasks fail
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) ::_exit(k.first_to_say("gpudiag: preflight on n2: mlx5_1 port 1 is DOWN", id) ? 1 : 0);
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      said += WEXITSTATUS(status);
    }
    EXPECT_EQ(said, 1) << tasks << " failing tasks, none of them local task 0";
    EXPECT_TRUE(k.first_to_say("gpudiag: preflight on n2: /dev/shm is 64 MiB", 2)) << "another problem";
  }
}

// More different lines than the page keeps: local task 0 says the rest, as without the
// page, so that a user's long list cannot make every task say every line (adversary 17).
TEST_F(StepKillerTest, PastTheSaidSlotsLocalTaskZeroSaysTheRest) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  for (std::size_t i = 0; i < StepKiller::kSaidSlots + 3; ++i) {
    const std::string line = "problem " + std::to_string(i);
    const bool in_the_page = i < StepKiller::kSaidSlots;
    EXPECT_EQ(k.first_to_say(line, 1), in_the_page) << i;
    EXPECT_EQ(k.first_to_say(line, 0), !in_the_page) << i;
  }
}

// A task that claimed a line and died before it wrote it holds a cancel back no longer
// than kSayingWait_s; one that wrote it, not at all.
TEST_F(StepKillerTest, ACancelWaitsForClaimedLinesAtMostTheSayingWait) {
  for (bool done : {true, false}) {
    g_ended.clear();
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (!k.first_to_say("gpudiag: preflight on n2: /dev/shm is 64 MiB", 1)) ::_exit(3);
      if (done) k.done_saying();
      k.mark_refused();
      ::_exit(1);
    }
    ASSERT_EQ(reap(pid), 1);
    k.task_reaped(1);
    const auto t0 = std::chrono::steady_clock::now();
    k.end_if_refused(12, 3, "n2", kDone);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(g_ended.size(), 1u);
    if (done) {
      EXPECT_LT(took, 0.5);
    } else {
      EXPECT_GE(took, StepKiller::kSayingWait_s - 0.05);
      EXPECT_LT(took, StepKiller::kSayingWait_s + 1.0);
    }
  }
}

TEST(StepKillerUnprepared, WithoutThePageLocalTaskZeroSaysWhy) {
  StepKiller k;
  EXPECT_TRUE(k.first_to_say("a", 0));
  EXPECT_TRUE(k.first_to_say("a", 0));
  EXPECT_FALSE(k.first_to_say("a", 1));
}

// ---------------------------------------------------------------------------------------
// Adversary review 16 (of 21d121c): the latch that picks the task that says why.

namespace {

// As preflight_passes does in each failing task: its problems, said only when it wins the
// latch. Returns every line said on the node, in the order the tasks ran (one at a time).
std::vector<std::string> say_as_the_failing_tasks_do(StepKiller& k,
                                                     const std::vector<std::pair<int, std::vector<std::string>>>& tasks) {
  int lines[2];
  if (::pipe(lines) != 0) return {};
  for (const auto& [id, problems] : tasks) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(lines[0]);
      for (const auto& p : problems)
        if (k.first_to_say(p, id)) {
          const std::string l = p + "\n";
          if (::write(lines[1], l.data(), l.size()) != static_cast<ssize_t>(l.size())) ::_exit(4);
          k.done_saying();
        }
      ::_exit(0);
    }
    reap(pid);
  }
  ::close(lines[1]);
  std::string all;
  char buf[512];
  for (ssize_t n; (n = ::read(lines[0], buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  ::close(lines[0]);
  std::vector<std::string> out;
  for (std::size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1)
    out.push_back(all.substr(at, nl - at));
  return out;
}

}  // namespace

// Fixed (medium; every cancel now waits the grace): the case 21d121c was made for. Local task 0 passes its checks and waits
// at the barrier for srun's verdict, so it counts as running (waits_for_other_nodes);
// local task 1 fails its own check (its CUDA_VISIBLE_DEVICES), wins the latch, writes the
// node's only line, reports "fail" to srun (await_barrier does not wait when !passed) and
// is refused at once. Slurmstepd reaps it while task 0 still waits for the stop that
// srun is only now sending: the cancel comes as task 1 is reaped, with no grace, the
// order that lost the refusal's line on 26.05 (step_killer.h). Before 21d121c no line
// was said here; now one is, and it can be lost the same way the grace exists to prevent.
TEST_F(StepKillerTest, Adv16_ALoneFailingTasksLineGetsTheGraceBeforeTheCancel) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end, 0.2));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t waiting = ::fork();  // local task 0: passed, waits for srun's verdict
  if (waiting == 0) {
    if (!k.mark_running(0)) ::_exit(2);
    ::close(go[1]);
    char c;
    while (::read(go[0], &c, 1) < 0) {
    }
    k.unmark_running();  // srun's stop: refuse_task("", false, false)
    ::_exit(0);
  }
  ::usleep(100 * 1000);  // it has counted itself
  const pid_t failing = ::fork();  // local task 1: fails its own check, says why, refused
  if (failing == 0) {
    if (!k.first_to_say("gpudiag: preflight on n2: the task sees 3 GPU(s)", 1)) ::_exit(3);
    k.done_saying();
    k.mark_refused();
    ::_exit(1);
  }
  ASSERT_EQ(reap(failing), 1) << "task 1 did not win the latch";
  k.task_reaped(1);
  const auto t0 = std::chrono::steady_clock::now();
  k.end_if_refused(12, 3, "n2", kReaped);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool cancelled_before_grace = !g_ended.empty() && took < 0.19;
  ::close(go[1]);
  ::close(go[0]);
  ASSERT_EQ(reap(waiting), 0);
  k.task_reaped(0);
  k.end_if_refused(12, 3, "n2", kDone);
  EXPECT_EQ(g_ended.size(), 1u);
  EXPECT_FALSE(cancelled_before_grace)
      << "the node's only line (task 1's) was just written and the step was cancelled at once (" << took
      << " s): srun may stop printing before it";
}

// Fixed (low; one latch per problem line now): the latch was one per node, not one per problem. Task 0 fails the node's
// check (an IB port); task 1 fails it too and also its own CUDA_VISIBLE_DEVICES. Whoever
// wins says only its own list, so when task 0 wins, task 1's problem is never said,
// though the README promises "also one only that task sees". The user fixes the port and
// fails again on the next step.
TEST_F(StepKillerTest, Adv16_AProblemOnlyALaterFailingTaskSeesIsSaidToo) {
  const std::string port = "gpudiag: preflight on n2: mlx5_1 port 1 is DOWN";
  const std::string own = "gpudiag: preflight on n2: CUDA_VISIBLE_DEVICES of task 1 names 3 GPUs, SLURM_GPUS_ON_NODE 2";
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  const auto said = say_as_the_failing_tasks_do(k, {{0, {port}}, {1, {port, own}}});
  EXPECT_EQ(std::count(said.begin(), said.end(), port), 1);
  EXPECT_EQ(std::count(said.begin(), said.end(), own), 1) << "task 1's own problem was never said";
}

// Attack that failed: tasks that fail at the same moment (64 raced forks, 10 rounds) say
// why exactly once per node, whichever wins.
TEST_F(StepKillerTest, Adv16_AttackFailed_RacingFailingTasksSayOnce) {
  for (int round = 0; round < 10; ++round) {
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::vector<pid_t> pids;
    for (int id = 0; id < 64; ++id) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(go[1]);
        char c;
        while (::read(go[0], &c, 1) < 0) {
        }
        ::_exit(k.first_to_say("gpudiag: preflight on n2: mlx5_1 port 1 is DOWN", id) ? 1 : 0);
      }
      pids.push_back(pid);
    }
    ::close(go[1]);
    ::close(go[0]);
    int said = 0;
    for (pid_t p : pids) said += reap(p);
    ASSERT_EQ(said, 1) << "round " << round;
  }
}

// Attack that failed: the shrink of counted[] to make room for the said lines. The page is
// still one page; a task at the last slot (kTaskSlots - 1) is taken out of the count as
// it is reaped; past it, tasks count until the step ends, as the rule says; no slot
// reaches the said lines (a task counted at 0 or the last slot, reaped, leaves them free).
TEST_F(StepKillerTest, Adv16_AttackFailed_TheShrunkSlotsKeepTheirRuleAndNeverTouchTheLatch) {
  const int last = static_cast<int>(StepKiller::kTaskSlots) - 1;
  for (int id : {0, last, last + 1, last + 4, 4095, 4096, -1}) {
    const bool slot = id >= 0 && id <= last;
    g_ended.clear();
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    ASSERT_EQ(run_task(k, false, id), 0);
    k.task_reaped(id);
    ASSERT_EQ(run_task(k, true, 1), 1);
    EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
    EXPECT_EQ(g_ended.size(), slot ? 0u : 1u)
        << id << (slot ? " is a slot: its reap takes it out" : " is past the slots: counted until the step ends");
    EXPECT_TRUE(k.first_to_say("x", 5)) << id << ": a slot's write reached the said lines";
  }
}

// Attack that failed: a second prepare (a second step in one stepd) opens the latch
// again, and another step's page (another slurmstepd, so another StepKiller) has a latch
// of its own: a process holding one page cannot silence the other's tasks.
TEST_F(StepKillerTest, Adv16_AttackFailed_PrepareReopensTheLatchAndAnotherStepsLatchIsItsOwn) {
  StepKiller mine, other;
  ASSERT_TRUE(mine.prepare(&record_end));
  ASSERT_TRUE(other.prepare(&record_end));
  const pid_t holder = ::fork();  // e.g. a watched step's relay of the other step, page mapped
  if (holder == 0) ::_exit(other.first_to_say("x", 0) && !other.first_to_say("x", 0) ? 0 : 1);
  ASSERT_EQ(reap(holder), 0);
  EXPECT_TRUE(mine.first_to_say("x", 3)) << "the other step's latch silenced this one";
  EXPECT_FALSE(mine.first_to_say("x", 0));
  ASSERT_TRUE(mine.prepare(&record_end));
  EXPECT_TRUE(mine.first_to_say("x", 0)) << "prepare left the latch set";
}

// ---------------------------------------------------------------------------------------
// Adversary review 17 (of e7a31d6): one hash per said line, the grace at every cancel.

namespace {

// The end function for the tests below: notes whether the line pipe held a line when the
// cancel came (what srun could have printed before it stopped reading).
int g_lines_fd = -1;
bool g_line_out_at_end = false;
std::string end_noting_the_line(std::uint32_t job, std::uint32_t step) {
  pollfd p{g_lines_fd, POLLIN, 0};
  g_line_out_at_end = ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
  return record_end(job, step);
}

// The unkeyed 32-bit FNV-1a step_killer.cpp hashed a line with before adversary review 17.
constexpr std::uint32_t kFnvPrime = 16777619u;
std::uint32_t fnv(std::uint32_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * kFnvPrime;
  return h;
}
std::uint32_t fnv_line(std::string_view s) { return fnv(2166136261u, s); }

// A name of 6 letters and digits such that prefix + name + suffix hashes as `target`:
// FNV-1a runs backwards (the prime is odd), so meet in the middle, 3 letters each side.
std::string colliding_name(const std::string& prefix, const std::string& suffix, std::uint32_t target) {
  std::uint32_t inv = kFnvPrime;
  for (int i = 0; i < 5; ++i) inv *= 2u - kFnvPrime * inv;
  std::uint32_t need = target;  // the state before the suffix
  for (auto it = suffix.rbegin(); it != suffix.rend(); ++it) need = (need * inv) ^ static_cast<unsigned char>(*it);
  const std::string abc = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const std::uint32_t start = fnv(2166136261u, prefix);
  std::unordered_map<std::uint32_t, std::string> forward;
  for (char a : abc)
    for (char b : abc)
      for (char c : abc) {
        const std::string s{a, b, c};
        forward.emplace(fnv(start, s), s);
      }
  for (char a : abc)
    for (char b : abc)
      for (char c : abc) {
        std::uint32_t h = (need * inv) ^ static_cast<unsigned char>(c);
        h = (h * inv) ^ static_cast<unsigned char>(b);
        h = (h * inv) ^ static_cast<unsigned char>(a);
        auto f = forward.find(h);
        if (f != forward.end()) return f->second + std::string{a, b, c};
      }
  return "";
}

}  // namespace

// Fixed (a cancel now waits for the lines claimed on its node, at most 1 s; low, pre-existing):
// the grace at the reap is timed from the reaped task, but under "said once" the line may
// be another task's, claimed and not yet written. Local task 2 passed and waits at the
// barrier (counted). Tasks 0 and 1 fail alike; task 1 claims the line first and stalls
// before its write (preempted under load, a slow stderr); task 0 finds the line claimed,
// says nothing, reports fail and is refused at once. Slurmstepd reaps task 0 beside the
// counted task 2 and cancels after 0.25 s: the node's only line was not yet written.
TEST_F(StepKillerTest, Adv17_ALineClaimedByAStalledSiblingIsCutByTheCancelOfAnotherTasksReap) {
  const std::string line = "gpudiag: preflight on n2: the task sees 1 GPU(s) (CUDA_VISIBLE_DEVICES) but 2 were allocated";
  StepKiller k;
  ASSERT_TRUE(k.prepare(&end_noting_the_line, 0.2));
  int go[2], lines[2], claimed[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(lines), 0);
  ASSERT_EQ(::pipe(claimed), 0);
  g_lines_fd = lines[0];
  const pid_t waiting = ::fork();  // task 2: passed, waits for srun's verdict
  if (waiting == 0) {
    if (!k.mark_running(2)) ::_exit(2);
    ::close(go[1]);
    char c;
    while (::read(go[0], &c, 1) < 0) {
    }
    k.unmark_running();
    ::_exit(0);
  }
  ::usleep(100 * 1000);
  const pid_t claimer = ::fork();  // task 1: claims the line, stalls, then writes it
  if (claimer == 0) {
    if (!k.first_to_say(line, 1)) ::_exit(3);
    if (::write(claimed[1], "c", 1) != 1) ::_exit(4);
    ::usleep(600 * 1000);
    const std::string l = line + "\n";
    if (::write(lines[1], l.data(), l.size()) != static_cast<ssize_t>(l.size())) ::_exit(4);
    k.done_saying();
    k.mark_refused();
    ::_exit(1);
  }
  char c;
  ASSERT_EQ(::read(claimed[0], &c, 1), 1);
  const pid_t skipper = ::fork();  // task 0: the same problem, already claimed: says nothing
  if (skipper == 0) {
    if (k.first_to_say(line, 0)) ::_exit(3);
    k.mark_refused();
    ::_exit(1);
  }
  ASSERT_EQ(reap(skipper), 1);
  k.task_reaped(0);
  k.end_if_refused(12, 3, "n2", kReaped);
  const bool cancelled = !g_ended.empty();
  const bool line_was_out = g_line_out_at_end;
  ::close(go[1]);
  ::close(go[0]);
  EXPECT_EQ(reap(claimer), 1);
  EXPECT_EQ(reap(waiting), 0);
  for (int fd : {lines[0], lines[1], claimed[0], claimed[1]}) ::close(fd);
  g_lines_fd = -1;
  ASSERT_TRUE(cancelled);
  EXPECT_TRUE(line_was_out) << "the step was cancelled before the node's only line (claimed by task 1) was written";
}

// Fixed (a keyed 64-bit hash now; low: the user's own step; it still fails): the line hash was a public, unkeyed
// 32-bit FNV-1a, and a user's NCCL_SOCKET_IFNAME name is in a line. Six letters (found
// here in milliseconds) make task 0's "names X" line hash as task 1's own GPU-count line;
// task 0 claims it first and task 1's problem is said nowhere (not to the user, not to
// slurmd's log). Accidental collisions are negligible; a keyed hash (random seed from
// getrandom in prepare, never seen by the program) closes the crafted one.
TEST_F(StepKillerTest, Adv17_ACraftedInterfaceNameHidesAnotherTasksOwnProblem) {
  const std::string on = "gpudiag: preflight on n2: ";
  const std::string own = on +
                          "the task sees 1 GPU(s) (CUDA_VISIBLE_DEVICES) but 2 were allocated: do not override "
                          "CUDA_VISIBLE_DEVICES, or check gres.conf";
  const std::string prefix = on + "NCCL_SOCKET_IFNAME names ";
  const std::string suffix = ", which does not exist here: fix the name or use a prefix (e.g. NCCL_SOCKET_IFNAME=ib)";
  const std::string name = colliding_name(prefix, suffix, fnv_line(own));
  ASSERT_EQ(name.size(), 6u);
  const std::string collider = prefix + name + suffix;
  ASSERT_EQ(fnv_line(collider), fnv_line(own));
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  // Same environment in both tasks; only task 1's CUDA_VISIBLE_DEVICES is wrong.
  const auto said = say_as_the_failing_tasks_do(k, {{0, {collider}}, {1, {own, collider}}});
  EXPECT_EQ(std::count(said.begin(), said.end(), collider), 1);
  EXPECT_EQ(std::count(said.begin(), said.end(), own), 1) << "task 1's problem was hidden by the name " << name;
}

// Attack that failed: the same crafted name cannot hide a problem of the node (an IB port,
// /dev/shm, the GPUs on PCI): every task finds it before the interface names, so its hash
// is in the page before any collider's.
TEST_F(StepKillerTest, Adv17_AttackFailed_ACraftedNameCannotHideANodeWideProblem) {
  const std::string on = "gpudiag: preflight on n2: ";
  const std::string port = on + "mlx5_1 port 1 is DOWN (phys_state Polling): check the cable or switch port, or drain "
                                "the node";
  const std::string prefix = on + "NCCL_SOCKET_IFNAME names ";
  const std::string suffix = ", which does not exist here: fix the name or use a prefix (e.g. NCCL_SOCKET_IFNAME=ib)";
  const std::string collider = prefix + colliding_name(prefix, suffix, fnv_line(port)) + suffix;
  ASSERT_EQ(fnv_line(collider), fnv_line(port));
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  const auto said = say_as_the_failing_tasks_do(k, {{0, {port, collider}}, {1, {port, collider}}, {2, {port, collider}}});
  EXPECT_EQ(std::count(said.begin(), said.end(), port), 1);
}

// Fixed (past the slots only local task 0 says, and the missing names are one line now;
// low): past the 16 slots every task said every line, and the user picks how many
// different lines there are: each name an exact NCCL_SOCKET_IFNAME lists that does not
// exist is a line. Before, one task of the node said them; now each of the node's tasks
// does, into the user's stderr and slurmd's log: 100 names x 8 tasks here; a 128 KiB
// variable (64 Ki one-letter names) x 512 tasks is some 5 GB of slurmd log per node and
// step. README ("### Preflight") says each problem is reported once per node.
TEST_F(StepKillerTest, Adv17_PastTheSlotsEveryTaskOfTheNodeSaysEveryUserNamedLine) {
  std::vector<std::string> problems;
  for (int i = 0; i < 100; ++i)
    problems.push_back("gpudiag: preflight on n2: NCCL_SOCKET_IFNAME names x" + std::to_string(i) +
                       ", which does not exist here");
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end));
  std::vector<std::pair<int, std::vector<std::string>>> tasks;
  for (int id = 0; id < 8; ++id) tasks.emplace_back(id, problems);
  const auto said = say_as_the_failing_tasks_do(k, tasks);
  std::size_t said_more_than_once = 0;
  for (const auto& p : problems) said_more_than_once += std::count(said.begin(), said.end(), p) > 1;
  EXPECT_EQ(said.size(), problems.size()) << "8 tasks alike said " << said.size() << " lines for " << problems.size()
                                          << " problems";
  EXPECT_EQ(said_more_than_once, 0u);
}

// Attack that failed: tasks racing with different lines (a node-wide one each, and one of
// their own shared by a few) never put one hash in two slots nor skip a line: each of the
// 10 different lines is said exactly once (48 raced forks, 10 rounds).
TEST_F(StepKillerTest, Adv17_AttackFailed_RacingTasksWithDifferentLinesSayEachExactlyOnce) {
  for (int round = 0; round < 10; ++round) {
    StepKiller k;
    ASSERT_TRUE(k.prepare(&record_end));
    int go[2], lines[2];
    ASSERT_EQ(::pipe(go), 0);
    ASSERT_EQ(::pipe(lines), 0);
    std::vector<pid_t> pids;
    for (int id = 0; id < 48; ++id) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(go[1]);
        ::close(lines[0]);
        char c;
        while (::read(go[0], &c, 1) < 0) {
        }
        const std::vector<std::string> mine = {id % 2 ? "A" : "B", "own " + std::to_string(id % 8),
                                                id % 2 ? "B" : "A"};
        for (const auto& p : mine)
          if (k.first_to_say(p, id)) {
            const std::string l = p + "\n";
            if (::write(lines[1], l.data(), l.size()) != static_cast<ssize_t>(l.size())) ::_exit(4);
          }
        ::_exit(0);
      }
      pids.push_back(pid);
    }
    ::close(go[1]);
    ::close(go[0]);
    ::close(lines[1]);
    for (pid_t p : pids) ASSERT_EQ(reap(p), 0);
    std::string all;
    char buf[512];
    for (ssize_t n; (n = ::read(lines[0], buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
    ::close(lines[0]);
    std::vector<std::string> said;
    for (std::size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1)
      said.push_back(all.substr(at, nl - at));
    std::sort(said.begin(), said.end());
    const std::vector<std::string> want = {"A", "B", "own 0", "own 1", "own 2", "own 3", "own 4", "own 5", "own 6", "own 7"};
    ASSERT_EQ(said, want) << "round " << round;
  }
}

// Attack that failed: slurmstepd's main thread sleeps the grace once per node, however
// many of its tasks are refused and reaped beside a counted one, and not again at exit;
// a reap with no task counted does not sleep (`ended_` is set before the sleep). A grace
// of 1 s, so that twenty forks under ASan on a loaded machine (0.2 s in CI) are not
// taken for a second sleep.
TEST_F(StepKillerTest, Adv17_AttackFailed_TheGraceIsSleptOncePerNodeHoweverManyTasksAreRefused) {
  StepKiller k;
  ASSERT_TRUE(k.prepare(&record_end, 1.0));
  const auto t0 = std::chrono::steady_clock::now();
  for (int id = 1; id <= 6; ++id) {  // reaps before any task counts: no sleep, no cancel
    ASSERT_EQ(run_task(k, true, id), 1);
    k.task_reaped(id);
    EXPECT_EQ(k.end_if_refused(12, 3, "n2", kReaped), std::nullopt);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.9) << "a reap slept";
  EXPECT_TRUE(g_ended.empty());
  ASSERT_EQ(run_task(k, false, 7000), 2) << "a task after the refusal is refused, uncounted";
  // A task past the slots counts until the step ends: every later reap would cancel.
  StepKiller k2;
  ASSERT_TRUE(k2.prepare(&record_end, 1.0));
  ASSERT_EQ(run_task(k2, false, 5000), 0);
  const auto t1 = std::chrono::steady_clock::now();
  for (int id = 0; id < 20; ++id) {
    ASSERT_EQ(run_task(k2, true, id), 1);
    k2.task_reaped(id);
    k2.end_if_refused(12, 3, "n2", kReaped);
  }
  k2.end_if_refused(12, 3, "n2", kDone);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_EQ(g_ended.size(), 1u);
  EXPECT_GE(took, 1.0) << "the grace was not slept";
  EXPECT_LT(took, 1.9) << "the grace was slept more than once";
}
