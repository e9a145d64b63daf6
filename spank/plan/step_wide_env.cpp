#include "spank/plan/step_wide_env.h"

#include <algorithm>

#include "spank/plan/nccl_defaults.h"

namespace gpudiag {

EnvList step_wide_env(StepInputs in) {
  // A dir is claimed by each task, as the user, on its own node: those steps plan alone.
  if (!step_runs_tasks(in.ids.step_id) || !wanted_diag_dir(in).empty()) return {};
  // The static part of the site's NCCL defaults: NCCL_IB_HCA=auto is each node's.
  in.nccl_env = nccl_defaults(in.cfg.plugin, IbInventory{}, in.cfg.ib);
  in.rendezvous.clear();
  in.dir_problem.reset();
  in.claimed_dir.clear();
  StepInputs other = in;
  in.ids.rank = 0;
  in.ids.local_rank = 0;
  in.ids.local_world_size = 1;
  in.ids.node_rank = 0;
  in.env.cuda_visible_devices.reset();
  in.env.nodename = "gpudiag-probe-a";
  in.hostname = "gpudiag-probe-a";
  other.ids.rank = 1;
  other.ids.local_rank = 1;
  other.ids.local_world_size = 2;
  other.ids.node_rank = 1;
  other.env.cuda_visible_devices = "0,1";
  other.env.nodename = "gpudiag-probe-b";
  other.hostname = "gpudiag-probe-b";
  const StepPlan a = plan_step(in);
  const StepPlan b = plan_step(other);
  if (a.fail || b.fail) return {};
  EnvList common;
  for (const auto& kv : a.env)
    if (std::find(b.env.begin(), b.env.end(), kv) != b.env.end()) common.push_back(kv);
  return common;
}

}  // namespace gpudiag
