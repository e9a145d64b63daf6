#pragma once
// What gpudiag-health asks the probe for, and the shape of a section that could not run.
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace gpudiag::probe {

struct ProbeOptions {
  std::string nvml_path, cuda_path, nccl_path;  // empty: the standard search
  std::vector<unsigned long long> sizes = {1ull << 30};  // all_reduce bytes per rank
  int iters = 20;
  int warmup = 5;
  bool bandwidth = false;                     // p2p: also time cuMemcpyPeer for each pair
  unsigned long long copy_bytes = 256ull << 20;  // p2p bandwidth transfer size
  // When waiting on the GPU stops (--wait-limit), so that a stuck kernel is reported
  // before gpudiag-health's deadline kills the probe.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// kind: "library" (not installed), "driver" (loaded but will not start), "no_gpu",
// "gpu" (a call on a GPU that exists failed: the GPU is the suspect), "driver_fault"
// (a driver an admin must repair), "busy" or "incompatible" (probe_failure.h).
nlohmann::json probe_error(const std::string& kind, const std::string& message, const std::string& hint = "");

}  // namespace gpudiag::probe
