#pragma once
// Fail-fast defaults for torch, torchrun, NCCL and DeepSpeed (DESIGN §4): a hang or a
// dead peer becomes an error in minutes, with a flight-recorder dump, instead of a job
// that burns its allocation. apply_env keeps any value the user set.
#include <string>

#include "nodeinfo/config.h"
#include "spank/dist_env.h"

namespace gpudiag {

// `diag_dir` (may be empty) receives torch's flight-recorder dumps; `fr_pipe` also sets
// the pipe through which the hang watchdog asks torch for a dump.
EnvList failfast_env(const FailFastSettings& f, const std::string& diag_dir, bool fr_pipe);

}  // namespace gpudiag
