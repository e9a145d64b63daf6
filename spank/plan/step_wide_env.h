#pragma once
// The variables every task of a step gets alike (MASTER_PORT, WORLD_SIZE, the site's NCCL
// and fail-fast defaults, ...), which srun sets once in its own environment: the step's
// tasks inherit them, and each task's apply_env finds them in place and sets only what is
// its own (RANK, LOCAL_RANK, the node's values). In a forked task every spank_setenv costs
// Slurm a 256 KiB buffer, so this is most of what a task set (issue 34, BENCHMARKS "A
// launch as cheap as pyxis").
//
// The tasks still plan everything themselves: a value srun got wrong (another node's
// config, a first host srun could not see) is only set again there. So the one rule is
// plan_step's; what is common is what it plans alike for two tasks that differ in every
// input of a task's own (rank, node, GPUs, host, the node's rendezvous and IB facts).
#include "spank/plan/step_plan.h"

namespace gpudiag {

// `in` as srun knows it: the config, the merged --diag, ids.job_id/step_id/world_size/
// num_nodes/master_addr, the environment's variables and the user's environment. Empty
// where the tasks need their own (a diag dir to claim, a batch or extern step).
EnvList step_wide_env(StepInputs in);

}  // namespace gpudiag
