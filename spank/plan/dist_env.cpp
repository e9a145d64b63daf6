#include "spank/plan/dist_env.h"

#include "spank/plan/port_salt.h"

namespace gpudiag {

int master_port(std::uint32_t job_id, std::uint32_t step_id, std::uint64_t salt, PortRange range) {
  const std::uint64_t span = static_cast<std::uint64_t>(range.last - range.first + 1);
  // A multiplier coprime with any span below it spreads consecutive jobs apart, so the
  // steps of one job and the next job's steps rarely meet. The salt's permutation keeps
  // distinct indexes distinct, so a job's steps still differ (port_salt.h).
  const std::uint64_t index = (static_cast<std::uint64_t>(job_id) * 7919u + step_id) % span;
  return range.first + static_cast<int>(salt ? permute_port_index(index, span, salt) : index);
}

EnvList torch_env(const TaskIds& t, PortRange range) {
  return {{"MASTER_ADDR", t.master_addr},
          {"MASTER_PORT", std::to_string(master_port(t.job_id, t.step_id, t.port_salt, range))},
          {"RANK", std::to_string(t.rank)},
          {"WORLD_SIZE", std::to_string(t.world_size)},
          {"LOCAL_RANK", std::to_string(t.local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(t.local_world_size)}};
}

EnvList torchrun_env(const TaskIds& t, PortRange range) {
  return {{"PET_NNODES", std::to_string(t.num_nodes)},
          {"PET_NODE_RANK", std::to_string(t.node_rank)},
          {"PET_NPROC_PER_NODE", std::to_string(t.nproc_per_node)},
          {"PET_MASTER_ADDR", t.master_addr},
          {"PET_MASTER_PORT", std::to_string(master_port(t.job_id, t.step_id, t.port_salt, range))},
          // --tee 3: torchrun copies each worker's output to the console line by line,
          // each line whole and tagged [<role><local_rank>]:, instead of letting its
          // workers share one pipe and interleave mid-line (issue 15.6).
          {"PET_TEE", "3"}};
}

}  // namespace gpudiag
