#pragma once
// NVML, initialised for one probe run: the library, every GPU's handle, and the error
// (as the probe's JSON) when NVML cannot be used.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "probe/nvml_api.h"

namespace gpudiag::probe {

struct NvmlGpu {
  nvmlDevice_t handle = nullptr;  // null: NVML cannot reach it (see problem)
  std::string uuid, pci_bus_id, name;
  bool mig = false;      // MIG mode is on: CUDA lists its instances, not the GPU
  bool hidden = false;   // NO_PERMISSION: a cgroup hides it from this process
  std::string problem;   // why the handle is missing
};

class NvmlSession {
 public:
  explicit NvmlSession(const std::string& path);
  ~NvmlSession();
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;
  const nlohmann::json& error() const { return error_; }
  const Nvml& nvml() const { return nvml_; }
  // Handles and identities of every GPU; empty when error() is set.
  std::vector<NvmlGpu>& gpus() { return gpus_; }

 private:
  Nvml nvml_;
  nlohmann::json error_;
  bool started_ = false;
  std::vector<NvmlGpu> gpus_;
};

// "GPU0, GPU3" for the GPUs in MIG mode; empty when none is.
std::string mig_gpus(const std::vector<NvmlGpu>& gpus);

}  // namespace gpudiag::probe
