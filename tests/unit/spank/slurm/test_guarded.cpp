// What the plugin writes to slurmd's log about a caught exception (issue 30): anyone's
// bytes in that text cannot forge a log line.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "spank/slurm/guarded.h"
#include "tests/unit/spank/forged_log_line.h"
#include "util/control_bytes.h"

using namespace gpudiag;
using gpudiag::test::kEscaped;
using gpudiag::test::kForgery;

TEST(Guarded, ACaughtExceptionsTextCannotForgeALogLine) {
  std::vector<std::string> log;
  auto to_log = [&](const char* where, const char* text) { log.push_back(std::string(where) + ": " + text); };
  EXPECT_EQ(guarded_call(to_log, "task init", -1, [&]() -> int { throw std::runtime_error(kForgery); }), -1);
  EXPECT_EQ(guarded_call(to_log, "exit", 5, []() -> int { throw 42; }), 5);
  EXPECT_EQ(guarded_call(to_log, "init", -1, [] { return 0; }), 0);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "task init: " + kEscaped);
  EXPECT_TRUE(is_one_printable_line(log[0]));
  EXPECT_EQ(log[1], "exit: unexpected error");
}
