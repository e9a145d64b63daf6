#pragma once
// NVML sections: the GPUs with their error counters and NVLink states, and the P2P
// status matrix. NVML needs no CUDA context, so these are cheap.
#include <nlohmann/json.hpp>

#include "probe/probe_options.h"

namespace gpudiag::probe {

nlohmann::json probe_devices(const ProbeOptions& opts);
nlohmann::json probe_p2p(const ProbeOptions& opts);

}  // namespace gpudiag::probe
