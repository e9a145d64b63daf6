#pragma once
// Every visible GPU with its primary context, one stream and a pair of timing events.
// Built once per probe run; calls that fail throw GpuCallError.
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "probe/cuda_api.h"

namespace gpudiag::probe {

struct GpuSlot {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;
  std::string name, pci_bus_id, uuid;
};

using Deadline = std::chrono::steady_clock::time_point;

class CudaSession {
 public:
  // On failure `error()` holds the probe_error JSON and there are no GPUs. Waits for
  // the GPU give up at `deadline`, so that a stuck kernel is reported, not waited on.
  CudaSession(const std::string& cuda_path, Deadline deadline);
  const nlohmann::json& error() const { return error_; }
  const Cuda& cu() const { return cu_; }
  std::vector<GpuSlot>& gpus() { return gpus_; }
  const std::vector<GpuSlot>& gpus() const { return gpus_; }
  void use(std::size_t i) const;  // makes GPU i's context current
  // Milliseconds between GPU i's start and stop events, after waiting for stop.
  float elapsed_ms(std::size_t i) const;
  // Polls until `ev` completes; throws GpuCallError at the deadline.
  void wait(std::size_t i, CUevent ev, const char* what) const;
  nlohmann::json describe() const;  // [{"index", "name", "pci_bus_id", "uuid"}]

 private:
  Cuda cu_;
  Deadline deadline_;
  nlohmann::json error_;
  std::vector<GpuSlot> gpus_;
};

// Device memory that frees itself; the GPU's context must exist while it lives. After a
// failed GPU call it is left to the process's exit (gpu_poisoned()).
class DeviceBuffer {
 public:
  DeviceBuffer(const CudaSession& s, std::size_t gpu, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr ptr() const { return ptr_; }

 private:
  const CudaSession& s_;
  std::size_t gpu_;
  CUdeviceptr ptr_ = 0;
};

}  // namespace gpudiag::probe
