#include <gtest/gtest.h>

#include <chrono>

#include "util/run_command.h"

using namespace gpudiag;

TEST(RunCommand, CapturesOutputAndExitCode) {
  auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, 5);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(describe_failure("x", r, 5), "x exited 3: err");
}

TEST(RunCommand, NoShellMeansMetacharactersAreJustBytes) {
  auto r = run_command({"echo", "$(id); rm -rf /"}, 5);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "$(id); rm -rf /\n");
}

TEST(RunCommand, DeadlineKillsTheWholeGroup) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_command({"sh", "-c", "sleep 30 & sleep 30"}, 0.3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(describe_failure("scontrol", r, 0.3).find("scontrol timed out after 0.3 s"), std::string::npos);
}

TEST(RunCommand, MissingProgramSaysSo) {
  auto r = run_command({"/nonexistent/scontrol"}, 1);
  EXPECT_FALSE(r.started);
  EXPECT_NE(describe_failure("scontrol", r, 1).find("No such file"), std::string::npos);
}

TEST(RunCommand, SignalIsReported) {
  auto r = run_command({"sh", "-c", "kill -SEGV $$"}, 5);
  EXPECT_EQ(r.signal, 11);
}

TEST(RunCommand, OutputIsBounded) {
  auto r = run_command({"head", "-c", "100000", "/dev/zero"}, 5, 1000);
  EXPECT_EQ(r.out.size(), 1000u);
}
