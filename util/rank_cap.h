#pragma once
// The most ranks (processes) one step's readers keep: hang reports' ranks, flight-recorder
// dumps, the NCCL log analyzer's processes. Far above any job gpudiag has met, and a
// bound on what a tampered or runaway input can make srun or the CLI keep.
#include <cstddef>

namespace gpudiag {

constexpr std::size_t kMaxRanks = 65536;

}  // namespace gpudiag
