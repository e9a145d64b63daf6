#pragma once
// The nccl check: one all_reduce across every local GPU in one process, with
// nccl-tests' algbw and busbw, a check of the reduced values, and a threshold per GPU
// model and count (nccl.min_bandwidth).
#include <nlohmann/json.hpp>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

// Pure: the probe's "allreduce" object against the settings. Bandwidth is recomputed
// here from bytes and time, so the formula lives in one tested place. The ranks are
// checked against NVML's list (the probe's join) and gpu.count: an all_reduce that
// left a GPU out says nothing about that GPU.
CheckResult evaluate_nccl(const nlohmann::json& data, const NcclCheckSettings& s, const GpuExpect& expect = {});
CheckResult run_nccl_check(const CheckContext& ctx);

}  // namespace gpudiag
