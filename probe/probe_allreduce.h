#pragma once
// Node-local NCCL all_reduce across every GPU from one process: ncclCommInitAll, one
// stream per GPU, grouped calls, CUDA-event timing after warm-up, and a check of the
// reduced values.
#include <nlohmann/json.hpp>

#include "probe/probe_options.h"

namespace gpudiag::probe {

nlohmann::json probe_allreduce(const ProbeOptions& opts);

}  // namespace gpudiag::probe
