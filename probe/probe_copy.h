#pragma once
// Copy bandwidth with cuMemcpy: device-to-device on each GPU (the yardstick for the
// all_reduce figures) and GPU-to-GPU for every ordered pair.
#include <nlohmann/json.hpp>

#include "probe/cuda_session.h"
#include "probe/probe_options.h"

namespace gpudiag::probe {

// [{"gpu", "bytes", "gbps"}]: one cuMemcpyDtoD of `bytes` per iteration, timed with
// events; gbps counts the bytes copied once (memory traffic is twice that).
nlohmann::json device_copy_bandwidth(CudaSession& s, std::size_t bytes, int iters);
// {"gpus", "peer_access": [[bool]], "gbps": [[num|null]]} for every ordered pair.
nlohmann::json probe_peer_bandwidth(const ProbeOptions& opts);

}  // namespace gpudiag::probe
