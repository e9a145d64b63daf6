#pragma once
// The plugin's thin hook into --diag=fabric (fabric/, issue 32): srun starts the
// coordinator, each task takes its part between its preflight and the barrier.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "fabric/fabric_wire.h"
#include "spank/plan/env_writer.h"
#include "spank/preflight/rendezvous_check.h"

namespace gpudiag {

// srun: starts the coordinator and puts SLURM_GPUDIAG_FABRIC in the step's environment; an
// error message, or "".
std::string start_fabric(const Config& cfg, std::uint32_t total_tasks, const std::string& diag_dir, uid_t uid,
                         std::uint32_t job, std::uint32_t step);

struct FabricTaskFacts {
  std::string host;
  std::uint32_t rank = 0, node_id = 0, nnodes = 1, local_rank = 0, local_tasks = 1;
  std::vector<std::string> job_env;  // NAME=VALUE, as the program will get it
  std::vector<std::string> argv;
  std::vector<RendezvousFacts> rendezvous;
};

// A task: whether it may go on. Without SLURM_GPUDIAG_FABRIC (no fabric test) it may. A task
// that cannot take part may not, and the node's first task says why; one that srun
// failed says nothing (srun printed the verdict).
struct FabricPart {
  bool pass = true;
  std::string say;  // for the step's stderr, "" for nothing
};
FabricPart fabric_part(EnvTarget& env, const Config& cfg, const FabricTaskFacts& t);

}  // namespace gpudiag
