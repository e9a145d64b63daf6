// What the plugin writes to slurmd's log about a caught exception or a relay that cannot
// start (issue 30): anyone's bytes in that text cannot forge a log line.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "spank/slurm/guarded.h"
#include "spank/relay/relay_notices.h"
#include "util/control_bytes.h"

using namespace gpudiag;

namespace {

// A newline and a forged slurmd line, ESC (a terminal sequence), DEL and C1 CSI.
const std::string kForgery = "bad\n[2026-01-01T00:00:00.000] error: FORGED\x1b[2J\x7f\xc2\x9b" "31m";
const std::string kEscaped = "bad\\x0a[2026-01-01T00:00:00.000] error: FORGED\\x1b[2J\\x7f\\xc2\\x9b31m";

}  // namespace

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

TEST(RelayNotices, AStartErrorCannotForgeALogLine) {
  for (const std::string& line :
       {node_relay_not_started(kForgery), task_relays_itself(3, kForgery), task_runs_without_relay(3, kForgery)}) {
    EXPECT_TRUE(is_one_printable_line(line)) << line;
    EXPECT_NE(line.find(kEscaped), std::string::npos) << line;
  }
  EXPECT_EQ(task_runs_without_relay(3, "cannot fork: Resource temporarily unavailable"),
            "gpudiag: task 3 runs without the output relay (no prefix, no hang watchdog): cannot fork: Resource "
            "temporarily unavailable");
  EXPECT_EQ(task_relays_itself(0, "no relay thread on this node"),
            "gpudiag: task 0 relays its own output (the node's relay thread refused it: no relay thread on this node)");
  EXPECT_EQ(node_relay_not_started("x"), "gpudiag: each task relays its own output: x");
}
