#pragma once
// How many GPUs a task sees, from CUDA_VISIBLE_DEVICES: one rule for torchrun's
// PET_NPROC_PER_NODE, the preflight's "sees N but N were allocated" and the fabric
// test's torchrun layout check.
//
// The rule is what CUDA itself did on a real H100 (driver 580.159.04, CUDA 13.0; torch
// 2.11 agreed), not a count of commas: CUDA reads the entries in order and stops at the
// first empty or malformed one (",0" shows nothing, "0,,1" one GPU, a UUID without its
// "GPU-" prefix nothing, "GPU-zzzz" nothing), reads an index as a number (" 0", "+0",
// "0a" and "00" are GPU 0), and refuses the whole list when a GPU repeats ("0,0", "0,00",
// a UUID beside a prefix of it: no GPU at all, cuInit fails). Indices and "GPU-"/"MIG-"
// UUIDs (Slurm 26.05 can write UUIDs) count alike. What needs the node's devices is out of
// this pure rule's reach: an entry naming a GPU the node lacks (CUDA stops there), and an
// index and a UUID that name the same GPU (counted as two; CUDA showed one).
#include <optional>
#include <string_view>

namespace gpudiag {

// nullopt: the variable is unset (CUDA shows every GPU). Slurm writes "NoDevFiles" when
// the step has none (malformed, so 0).
std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices);

}  // namespace gpudiag
