#pragma once
// Runs gpudiag-gpu-probe (every GPU operation lives there, ARCHITECTURE §6) with a hard
// deadline and turns what happened into the probe's JSON or a finding.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"
#include "util/run_command.h"

namespace gpudiag {

struct ProbeOutcome {
  nlohmann::json data;             // the probe's object, when it ran and had something to say
  std::optional<Finding> failure;  // why there is no data
  bool ok() const { return !failure; }
};

// Pure. Timeouts and deaths by signal are CRITICAL (a hung or crashing GPU stack is a
// bad node); a missing library, driver or GPU is UNKNOWN, or OK when the config
// expects no GPUs; a failed call on a GPU that exists ("gpu") and a broken driver
// ("driver_fault") are CRITICAL; "busy" and "incompatible" (conditions of this run or
// install, not faults) are UNKNOWN.
ProbeOutcome interpret_probe(const CommandResult& run, const std::string& probe, double timeout_s,
                             const GpuExpect& expect);

// The probe to run: gpu.probe, else ../libexec/gpudiag/ next to this executable, else
// the install prefix's libexec. Empty when none exists; `looked` lists where it looked.
std::string locate_probe(const GpuExpect& expect, std::vector<std::string>& looked);

// Runs the probe's `section` (devices, p2p, allreduce) with `args`. Under --fs-root the
// driver cannot be redirected, so the real probe is not run there: a finding says so
// unless the config names a probe (tests use stand-ins).
ProbeOutcome run_probe(const CheckContext& ctx, const std::string& section, const std::vector<std::string>& args);

}  // namespace gpudiag
