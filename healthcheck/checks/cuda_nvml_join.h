#pragma once
// What the probe found when it joined CUDA's GPU list to NVML's (on UUID or bus ID):
// a GPU the driver knows that CUDA does not list cannot run work, whatever the
// measurements on the others say.
#include <nlohmann/json.hpp>

#include "healthcheck/report/report.h"

namespace gpudiag {

// Pure: a CRITICAL finding per entry of section["missing_from_cuda"], and one per CUDA
// device that NVML does not list ("nvml_index": null). Returns how many it added.
int add_cuda_nvml_gaps(CheckResult& out, const nlohmann::json& section);

}  // namespace gpudiag
