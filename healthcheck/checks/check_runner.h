#pragma once
// Runs the selected checks in order under one time budget. Checks run on a worker
// thread so that a read that hangs (a wedged device, a dead NFS fs-root) turns into a
// CRITICAL "timed out" result instead of a health check that never returns.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"
#include "config/check_names.h"

namespace gpudiag {

struct RunOptions {
  std::vector<std::string> checks;
  double timeout_s = 50;
  bool want_topology = false;
};

struct RunOutcome {
  Report report;
  // A check is still running on an abandoned thread: the caller must print and leave
  // with _exit, since the thread may hold references into the caller's frame.
  bool abandoned_thread = false;
};

using CheckFn = std::function<CheckResult(const CheckContext&)>;
using CheckTable = std::map<std::string, CheckFn>;

// Name -> implementation for every check in kCheckNames (config/check_names.h).
const CheckTable& builtin_checks();
RunOutcome run_checks(const CheckContext& ctx, const RunOptions& opts, const std::string& node,
                      const CheckTable& table = builtin_checks());

}  // namespace gpudiag
