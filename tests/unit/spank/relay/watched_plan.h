#pragma once
// What the relay tests of a watched step (the hang watchdog on) put in the plan: the
// watchdog's times, and its state and diag dirs, which each test makes under /tmp.
#include <string>

#include "spank/plan/relay_plan.h"

namespace gpudiag::test {

inline void watch_hangs(RelayPlan& plan, double hang_s, const std::string& state, const std::string& diag) {
  plan.hang.duration_s = hang_s;
  plan.hang.kill_grace_s = 1;
  plan.hang.report_timeout_s = 5;
  plan.hang.state_dir = state;
  plan.hang.diag_dir = diag;
  plan.hang.host = "h";
  plan.hang.step = "1.0";
}

}  // namespace gpudiag::test
