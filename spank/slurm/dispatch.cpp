// gpudiag.so's entry points (ARCHITECTURE §3): each callback asks spank_context() once and
// routes to the file of that context (contexts.h), inside guarded(): no exception may
// cross into srun or slurmstepd, and a failure is a clear message, never a crash.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "spank/slurm/contexts.h"
#include "spank/slurm/slurm_compat.h"
#include "spank/slurm/spank_access.h"
#include "util/task_path.h"

// SPANK_PLUGIN() gives these internal linkage in C++: declare them by hand.
extern "C" {
extern const char plugin_name[] = "gpudiag";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

// Slurm 25.05+ asks each plugin what a failing slurm_spank_init in slurmstepd means:
// ESPANK_NODE_FAILURE (the default) drains the node, ESPANK_JOB_FAILURE fails the job. A
// failure of gpudiag's own init (a bad config, an error of ours) is the job's problem and
// must never take the node out of service. gpudiag's init already returns 0 in slurmstepd
// for a bad config and fails the tasks instead (in_slurmstepd.cpp, Stepd::remote_error), and
// so do its option callback and init_post_opt, an exception included (guarded_remote); this
// covers what is left (an option that cannot be registered). Older releases have no such
// variable: there a non-zero init return fails the step's launch.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
extern "C" {
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
}
#endif

namespace gpudiag {

int diag_option_cb(int, const char* optarg, int remote) {
  if (remote) return in_slurmstepd::guarded_remote("--diag", [&] { return in_slurmstepd::diag_option(optarg); });
  return guarded("--diag", -1, [&] {
    if (spank_context() == S_CTX_ALLOCATOR) return in_allocator::diag_option(optarg);
    return in_srun::diag_option(optarg);
  });
}

namespace {

// slurmd, prolog/epilog and the job script: the config is read only to say that it is
// broken; an error there would take more than the user's step down with it.
int init_elsewhere(int ac, char** av) {
  auto cfg = load_plugin_config(ac, av);
  if (!cfg) slurm_error("%s", cfg.error().c_str());
  return 0;
}

}  // namespace
}  // namespace gpudiag

using namespace gpudiag;

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  if (spank_context() == S_CTX_REMOTE)
    return in_slurmstepd::guarded_remote("init", [&] { return in_slurmstepd::init(sp, ac, av); });
  return guarded("init", -1, [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL: return in_srun::init(sp, ac, av);
      case S_CTX_ALLOCATOR: return in_allocator::init(sp, ac, av);
      default: return init_elsewhere(ac, av);
    }
  });
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  if (spank_context() == S_CTX_REMOTE)
    return in_slurmstepd::guarded_remote("options", [&] { return in_slurmstepd::init_post_opt(sp); });
  return guarded("options", -1, [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL: return in_srun::init_post_opt(sp);
      case S_CTX_ALLOCATOR: return in_allocator::init_post_opt(sp);
      default: return 0;
    }
  });
}

int slurm_spank_user_init(spank_t sp, int, char**) {
  return guarded("user init", 0, [&] { return spank_context() == S_CTX_REMOTE ? in_slurmstepd::user_init(sp) : 0; });
}

int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return guarded("local user init", 0,
                 [&] { return spank_context() == S_CTX_LOCAL ? in_srun::local_user_init(sp) : 0; });
}

GPUDIAG_TASK_PATH int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("task init", 0, [&]() GPUDIAG_TASK_PATH { return spank_context() == S_CTX_REMOTE ? in_slurmstepd::task_init(sp) : 0; });
}

int slurm_spank_task_post_fork(spank_t sp, int, char**) {
  return guarded("task post fork", 0,
                 [&] { return spank_context() == S_CTX_REMOTE ? in_slurmstepd::task_post_fork(sp) : 0; });
}

int slurm_spank_task_exit(spank_t sp, int, char**) {
  return guarded("task exit", 0, [&] { return spank_context() == S_CTX_REMOTE ? in_slurmstepd::task_exit(sp) : 0; });
}

int slurm_spank_exit(spank_t sp, int, char**) {
  return guarded("exit", 0, [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL: return in_srun::exit(sp);
      case S_CTX_REMOTE: return in_slurmstepd::exit(sp);
      default: return 0;
    }
  });
}

}  // extern "C"
