#pragma once
// NVML numbers GPUs in PCI order; CUDA numbers them its own way (CUDA_DEVICE_ORDER,
// cgroups, MIG). The two lists are joined on UUID, else on the PCI bus ID, whose
// formats differ ("00000000:19:00.0" from NVML, "0000:19:00.0" from CUDA).
#include <string>
#include <vector>

#include "probe/cuda_session.h"
#include "probe/nvml_session.h"

namespace gpudiag::probe {

// "00000000:19:00.0" and "0000:19:00.0" -> "0000:19:00.0"; "" when unparseable.
std::string normalise_bus_id(const std::string& id);
// For each CUDA ordinal, the NVML index of the same GPU, or -1.
std::vector<int> match_cuda_to_nvml(const std::vector<GpuSlot>& cuda, const std::vector<NvmlGpu>& nvml);

}  // namespace gpudiag::probe
