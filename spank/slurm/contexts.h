#pragma once
// The plugin routes once (dispatch.cpp): each SPANK callback asks spank_context() one time
// and calls the file of that context, which keeps its own state. Slurm loads the plugin on
// its own in each process, so exactly one of these is ever in use in a process:
//   in_srun.cpp        srun (S_CTX_LOCAL), as the user, once per step
//   in_slurmstepd.cpp  slurmstepd (S_CTX_REMOTE), root then the user, one step on one node
//   in_allocator.cpp   sbatch and salloc (S_CTX_ALLOCATOR), as the user, once per job
// slurmd and the job script contexts only read the config (dispatch.cpp).
// Module-only: included after <slurm/spank.h>.
#include <utility>

#include "spank/slurm/guarded.h"

namespace gpudiag {

// Every entry point from Slurm goes through here: no exception may cross into srun or
// slurmstepd. `on_error` is what Slurm gets back if one is thrown; its text is escaped.
template <class F>
int guarded(const char* where, int on_error, F&& body) noexcept {
  return guarded_call([](const char* at, const char* text) { slurm_error("gpudiag: %s: %s", at, text); }, where,
                      on_error, std::forward<F>(body));
}

namespace in_srun {
int init(spank_t sp, int ac, char** av);
int diag_option(const char* optarg);
int init_post_opt(spank_t sp);
int local_user_init(spank_t sp);
int exit(spank_t sp);
}  // namespace in_srun

namespace in_slurmstepd {
// What went wrong in slurmstepd before the tasks (an exception included): logged and kept,
// it fails each task in task_init with its text. The step is the job's; a callback's
// non-zero return there could count against the node (Slurm 25.05 and later treat any
// non-zero return as an error, and slurm_spank_init_failure_mode covers init alone).
void keep_error(const char* where, const char* text) noexcept;

// Every entry point of slurmstepd's options: an exception is the job's error (keep_error).
template <class F>
int guarded_remote(const char* where, F&& body) noexcept {
  return guarded_call(&keep_error, where, 0, std::forward<F>(body));
}

int init(spank_t sp, int ac, char** av);
int diag_option(const char* optarg);
int init_post_opt(spank_t sp);
int user_init(spank_t sp);
int task_init(spank_t sp);
int task_post_fork(spank_t sp);
int task_exit(spank_t sp);
int exit(spank_t sp);
}  // namespace in_slurmstepd

namespace in_allocator {
int init(spank_t sp, int ac, char** av);
int diag_option(const char* optarg);
int init_post_opt(spank_t sp);
// The job's MASTER_PORT secret (port_salt.h); srun that makes its own job does it too.
void give_job_a_port_salt();
}  // namespace in_allocator

}  // namespace gpudiag
