#pragma once
// Which kind of failure the probe reports, each with its own fix line. "gpu" and
// "driver_fault" make gpudiag-health CRITICAL: the node needs an admin. "busy" (out of
// memory, an exclusive-process GPU in use) and "incompatible" (an NCCL built for a
// newer driver) are conditions of this run or this install, not faults: UNKNOWN.
#include <nlohmann/json.hpp>

#include <string>

#include "probe/cuda_api.h"

namespace gpudiag::probe {

// Drivers from R470 (CUDA 11.4) on export what the probe needs; older ones lack some.
extern const char* const kOldDriverHint;

nlohmann::json nvml_init_failure(int nvml_code, const std::string& text);
nlohmann::json cuda_init_failure(CUresult r, const std::string& text);
// A failed CUDA or NCCL call: `nccl_text` is NCCL's own account (ncclGetLastError),
// `hint` the fix when the GPU is the suspect.
nlohmann::json gpu_call_failure(const GpuCallError& e, const std::string& nccl_text, const std::string& hint);

}  // namespace gpudiag::probe
