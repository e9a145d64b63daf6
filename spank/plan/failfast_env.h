#pragma once
// Fail-fast defaults for torch, torchrun, NCCL and DeepSpeed (ARCHITECTURE §6): a hang or a
// dead peer becomes an error in minutes, with a flight-recorder dump, instead of a job
// that burns its allocation. apply_env keeps any value the user set.
#include <string>

#include "config/config.h"
#include "spank/plan/dist_env.h"
#include "spank/plan/env_writer.h"

namespace gpudiag {

// torch 2.2 renamed its ProcessGroupNCCL variables (pytorch#114077); torch <= 2.1 reads
// only the old name, torch >= 2.2 the new one first. "" where a name has no old form.
std::string old_torch_name(const std::string& name);

// `diag_dir` (may be empty) receives torch's flight-recorder dumps; `fr_pipe` also sets
// the pipe through which the hang watchdog asks torch for a dump. Each variable that
// has an old torch name is set under both; `task_env` (may be null) is the task's
// environment, where a value the user gave under either name becomes the value of both.
EnvList failfast_env(const FailFastSettings& f, const std::string& diag_dir, bool fr_pipe,
                     EnvTarget* task_env = nullptr);

}  // namespace gpudiag
