// Whom slurmstepd's signals reach, by ProctrackType: the rule the output relay forwards by.
#include <gtest/gtest.h>

#include "spank/slurm/proctrack_kind.h"

using namespace gpudiag;

TEST(StepSignalReach, CgroupSignalsOnlySlurmstepdsChildrenSoTheRelayPassesThemOn) {
  auto v = step_signal_reach(std::string("proctrack/cgroup"));
  EXPECT_EQ(v.reach, StepSignalReach::kRelayOnly);
  EXPECT_FALSE(v.notice);
}

TEST(StepSignalReach, LinuxprocAndPgidSignalTheProgramItself) {
  for (const char* type : {"proctrack/linuxproc", "proctrack/pgid"}) {
    auto v = step_signal_reach(std::string(type));
    EXPECT_EQ(v.reach, StepSignalReach::kProgram) << type;
    EXPECT_FALSE(v.notice) << type;
  }
}

TEST(StepSignalReach, UnknownTypeKeepsTheOldRuleAndSaysSo) {
  auto v = step_signal_reach(std::string("proctrack/site\x1b[2Jspecial"));
  EXPECT_EQ(v.reach, StepSignalReach::kProgram);
  ASSERT_TRUE(v.notice);
  EXPECT_EQ(v.notice->rfind("gpudiag: unknown ProctrackType 'proctrack/site", 0), 0u) << *v.notice;
  EXPECT_EQ(v.notice->find('\x1b'), std::string::npos) << "control bytes reach the log";
  // Not a prefix match: "cgroup" alone or another plugin with that prefix is not cgroup.
  for (const char* type : {"cgroup", "proctrack/cgroup2", "proctrack/Cgroup", ""}) {
    auto w = step_signal_reach(std::string(type));
    EXPECT_EQ(w.reach, StepSignalReach::kProgram) << type;
    EXPECT_TRUE(w.notice) << type;
  }
}

TEST(StepSignalReach, UnreadableTypeKeepsTheOldRuleAndSaysWhy) {
  auto v = step_signal_reach(std::nullopt);
  EXPECT_EQ(v.reach, StepSignalReach::kProgram);
  ASSERT_TRUE(v.notice);
  EXPECT_NE(v.notice->find("cannot read ProctrackType"), std::string::npos) << *v.notice;
}
