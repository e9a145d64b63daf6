#pragma once
// How many GPUs a task sees, from CUDA_VISIBLE_DEVICES: one rule for torchrun's
// PET_NPROC_PER_NODE, the preflight's "sees N but N were allocated" and the fabric
// test's torchrun layout check.
#include <optional>
#include <string_view>

namespace gpudiag {

// nullopt: the variable is unset (CUDA shows every GPU). Slurm writes "NoDevFiles" when
// the step has none; empty entries ("0,,1", a trailing ',') name no device.
std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices);

}  // namespace gpudiag
