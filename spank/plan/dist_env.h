#pragma once
// The distributed-training environment of one task, computed from its Slurm ids
// alone: no RPC to slurmctld (at 10,000 tasks that would be a denial of service).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

struct TaskIds {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  int rank = 0;             // SLURM_PROCID
  int world_size = 1;       // SLURM_STEP_NUM_TASKS
  int local_rank = 0;       // SLURM_LOCALID
  int local_world_size = 1; // tasks of this step on this node
  int node_rank = 0;        // SLURM_NODEID
  int num_nodes = 1;        // SLURM_STEP_NUM_NODES
  std::string master_addr;  // first host of the step's nodelist
  int nproc_per_node = 1;   // for torchrun: GPUs the task sees, or the config's value
  std::uint64_t port_salt = 0;  // the job's secret for MASTER_PORT (port_salt.h); 0: none
};

struct PortRange {
  int first = 61000;  // above Linux's default ephemeral range (32768-60999)
  int last = 65535;
};

// Same job and step: same port on every node. Different steps of one job (which may
// share nodes) get different ports. The salt, a secret of the job's, keeps another user
// from computing the port from the job id and listening there first.
int master_port(std::uint32_t job_id, std::uint32_t step_id, std::uint64_t salt, PortRange range);

using EnvList = std::vector<std::pair<std::string, std::string>>;
// torch.distributed env:// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_*).
EnvList torch_env(const TaskIds& t, PortRange range);
// torchrun's own arguments (PET_*), for one torchrun per node.
EnvList torchrun_env(const TaskIds& t, PortRange range);

}  // namespace gpudiag
