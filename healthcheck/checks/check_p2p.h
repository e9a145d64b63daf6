#pragma once
// The p2p check: NVML's P2P status for READ, WRITE and NVLINK between every GPU pair,
// against p2p.expect, and optionally the measured copy bandwidth per pair.
#include <nlohmann/json.hpp>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

// Pure: the probe's "p2p" object against the settings.
CheckResult evaluate_p2p(const nlohmann::json& data, const P2pSettings& s);
CheckResult run_p2p_check(const CheckContext& ctx);

}  // namespace gpudiag
