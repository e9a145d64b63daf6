// Pure parts of the hang watchdog: durations and sizes, /proc/PID/stat, the silence rule.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>

#include "nodeinfo/duration.h"
#include "nodeinfo/proc_tree.h"
#include "spank/hang_watchdog.h"
#include "stacks/step_processes.h"

using namespace gpudiag;

TEST(Duration, Units) {
  EXPECT_EQ(parse_duration("90"), 90);
  EXPECT_EQ(parse_duration("20s"), 20);
  EXPECT_EQ(parse_duration("10m"), 600);
  EXPECT_EQ(parse_duration("1.5m"), 90);
  EXPECT_EQ(parse_duration("2h"), 7200);
  for (const char* bad : {"", "-5", "5x", "m", "1e400", "nan", " 5", "5 s"}) EXPECT_FALSE(parse_duration(bad)) << bad;
}

TEST(Size, Units) {
  EXPECT_EQ(parse_size("64M"), 64ull << 20);
  EXPECT_EQ(parse_size("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_size("512"), 512ull);
  for (const char* bad : {"", "-1G", "1Q", "G"}) EXPECT_FALSE(parse_size(bad)) << bad;
}

TEST(ProcStat, ParsesRealLinesWithAwkwardNames) {
  // A real line from this kernel, with a comm that holds ") (" and spaces.
  auto s = parse_proc_stat(
      "4242 (my (weird) name) S 4200 4242 4200 34816 4242 4194560 1163 0 0 0 150 25 0 0 20 0 3 0 "
      "1799519 28315648 3074 18446744073709551615 1 1 0 0 0 0 0 4096 65536 0 0 0 17 1 0 0 0 0 0\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->comm, "my (weird) name");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 4200);
  EXPECT_EQ(s->cpu_ticks, 175u);
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("12 (x) S"));
  EXPECT_FALSE(parse_proc_stat("abc (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13"));
}

TEST(ProcStat, OurOwnTree) {
  ProcTable t = snapshot_processes();
  ASSERT_TRUE(t.count(::getpid()));
  auto tree = process_tree(t, ::getppid());
  EXPECT_NE(std::find(tree.begin(), tree.end(), ::getpid()), tree.end());
  EXPECT_TRUE(process_tree(t, -5).empty());
}

TEST(NodeSilent, EveryTaskMustBeQuiet) {
  EXPECT_TRUE(node_silent(100, {70, 80}, 20));
  EXPECT_FALSE(node_silent(100, {70, 90}, 20));  // one task wrote 10 s ago
  EXPECT_FALSE(node_silent(100, {}, 20));
  EXPECT_FALSE(node_silent(100, {0}, 0));        // off
}

TEST(StepId, ParsesAndRejects) {
  auto a = parse_step_id("1234.0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->job, "1234");
  EXPECT_EQ(a->step, "0");
  EXPECT_FALSE(parse_step_id("1234")->step);
  for (const char* bad : {"", "12.x", "abc", ".1", "1.", "1;rm -rf"}) EXPECT_FALSE(parse_step_id(bad)) << bad;
}

TEST(Environ, FindsExactNames) {
  static const char kEnv[] = "SLURM_JOB_ID_X=9\0SLURM_JOB_ID=42\0EMPTY=\0";
  std::string env(kEnv, sizeof kEnv - 1);
  EXPECT_EQ(environ_value(env, "SLURM_JOB_ID"), "42");
  EXPECT_EQ(environ_value(env, "EMPTY"), "");
  EXPECT_FALSE(environ_value(env, "SLURM"));
}
