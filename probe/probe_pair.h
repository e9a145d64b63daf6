#pragma once
// One rank of a two-node NCCL all_reduce for the fabric test (issue 32): rank 0 makes
// the unique id (and, in NCCL, stays the bootstrap root), says it at once through
// `say_id` (the caller passes it to the other node through srun), and both ranks run
// the all_reduce on their node's first GPU. The figure is NCCL's bus bandwidth for two
// ranks (algbw x 2(n-1)/n = algbw).
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "probe/probe_options.h"

namespace gpudiag::probe {

// `id_hex`: rank 1's id from rank 0 (256 lowercase hex digits); "" for rank 0.
nlohmann::json probe_pair(const ProbeOptions& opts, int rank, const std::string& id_hex,
                          const std::function<void(const std::string&)>& say_id);

}  // namespace gpudiag::probe
