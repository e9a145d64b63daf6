#pragma once
// How many GPUs a task sees, from CUDA_VISIBLE_DEVICES: one rule for torchrun's
// PET_NPROC_PER_NODE and for the preflight's "sees N but N were allocated".
#include <optional>
#include <string_view>

namespace gpudiag {

// nullopt: the variable is unset (CUDA shows every GPU). Slurm writes "NoDevFiles" when
// the step has none; empty entries ("0,,1", a trailing ',') name no device.
std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices);

}  // namespace gpudiag
