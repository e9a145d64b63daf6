// What the plugin writes to slurmd's log about a relay that cannot start (issue 30):
// anyone's bytes in that text cannot forge a log line.
#include <gtest/gtest.h>

#include <string>

#include "spank/relay/relay_notices.h"
#include "tests/unit/spank/forged_log_line.h"
#include "util/control_bytes.h"

using namespace gpudiag;
using gpudiag::test::kEscaped;
using gpudiag::test::kForgery;

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
