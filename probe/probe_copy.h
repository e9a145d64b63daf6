#pragma once
// Copy bandwidth with cuMemcpy: device-to-device on each GPU (the yardstick for the
// all_reduce figures) and GPU-to-GPU for every ordered pair.
#include <nlohmann/json.hpp>

#include "probe/cuda_session.h"
#include "probe/nvml_session.h"
#include "probe/probe_options.h"

namespace gpudiag::probe {

// [{"gpu", "bytes", "gbps"}]: one cuMemcpyDtoD of `bytes` per iteration, timed with
// events; gbps counts the bytes copied once (memory traffic is twice that).
nlohmann::json device_copy_bandwidth(CudaSession& s, std::size_t bytes, int iters);
// {"gpus", "peer_access": [[bool]], "gbps": [[num|null]]} for every ordered pair, rows
// and columns in NVML order (`nvml`), as the P2P status matrices are. A GPU that CUDA
// does not list has null entries and is named in "missing_from_cuda".
nlohmann::json probe_peer_bandwidth(const ProbeOptions& opts, const std::vector<NvmlGpu>& nvml);
// [{"index", "name", "pci_bus_id", "uuid", "nvml_index"}] and the NVML GPUs that CUDA
// does not list, {"index", "pci_bus_id", "uuid"} each.
nlohmann::json describe_joined(const CudaSession& s, const std::vector<int>& nvml_of);
nlohmann::json missing_from_cuda(const std::vector<NvmlGpu>& nvml, const std::vector<int>& nvml_of);

}  // namespace gpudiag::probe
