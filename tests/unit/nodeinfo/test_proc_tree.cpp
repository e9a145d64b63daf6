// /proc/PID/stat and the process tree (proc_tree).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>

#include "nodeinfo/proc_tree.h"

using namespace gpudiag;

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
