#pragma once
// Which nccl.min_bandwidth entry applies to a node: GPU model and count decide.
#include <string>
#include <vector>

#include "config/config.h"

namespace gpudiag {

// Pure. An entry for this model and exactly this many GPUs wins over one for the model
// at any count; within each kind the first in the file wins. nullptr: none applies.
const BandwidthRule* choose_bandwidth_rule(const std::vector<BandwidthRule>& rules, const std::string& model, int gpus);

}  // namespace gpudiag
