// srun (S_CTX_LOCAL), as the user, once per step: the preflight barrier's and the fabric
// test's coordinators, the job's port salt when srun makes its own job, and what the step
// left in the diag dir when it ends.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "spank/slurm/contexts.h"

#include "config/config.h"
#include "spank/plan/diag_dir.h"
#include "spank/plan/diag_options.h"
#include "spank/plan/step_plan.h"
#include "spank/preflight/fabric_step.h"
#include "spank/preflight/preflight_barrier.h"
#include "spank/slurm/slurm_compat.h"
#include "spank/slurm/spank_access.h"
#include "spank/watchdog/step_summary.h"
#include "stacks/verdict/step_verdict.h"
#include "util/private_file.h"

namespace gpudiag::in_srun {
namespace {

struct Srun {
  Config cfg;
  DiagOptions diag;                     // GPUDIAG_DIAG, then --diag, merged in init_post_opt
  std::optional<std::string> diag_arg;  // --diag's argument, when given
  // Which step this is, for the summary at its end.
  std::uint32_t job_id = 0, step_id = 0;
  bool have_step = false;
  uid_t job_uid = 0;  // whose diag dir it is (srun as root may run tasks as a user)
};

Srun g;

// srun, once per step: the coordinator of the preflight barrier. A setenv here still
// reaches the step's environment (22.05, checked). Without the preflight the variable is
// removed, so that a step inside a step never reports to the outer srun.
void start_preflight_barrier(spank_t sp) {
  ::unsetenv(kBarrierEnv);
  if (!g.diag.preflight.value_or(g.cfg.plugin.preflight.enabled) && !g.diag.fabric) return;
  std::uint32_t total = 0;
  if (!item(sp, S_JOB_TOTAL_TASK_COUNT, total) || total <= 1) return;
  auto started = start_barrier_server(total, kBarrierWait_s + 10);
  if (!started.endpoint) {
    slurm_error("gpudiag: the preflight runs without its cross-node barrier (%s): a node that passes starts the "
                "program without waiting for the others",
                started.error.c_str());
    return;
  }
  ::setenv(kBarrierEnv, format_barrier_env(*started.endpoint).c_str(), 1);
}

// srun, once per step, under --diag=fabric: the fabric test's coordinator (fabric/). As
// for the barrier, the variable is removed otherwise, so a step inside a step never
// reports to the outer srun.
void start_fabric_test(spank_t sp) {
  ::unsetenv(fabric::kFabricEnv);
  std::uint32_t total = 0;
  if (!g.diag.fabric || !g.have_step || !item(sp, S_JOB_TOTAL_TASK_COUNT, total) || total <= 1) return;
  const char* submit = std::getenv("SLURM_SUBMIT_DIR");
  const std::string dir = diag_dir_path(g.diag, submit ? submit : "", current_dir(), g.job_id, g.step_id);
  const std::string err =
      start_fabric(g.cfg, total, safe_env_value(dir) ? dir : "", g.job_uid, g.job_id, g.step_id);
  if (!err.empty())
    slurm_error("gpudiag: --diag=fabric: no fabric test (%s): the step starts without it", err.c_str());
}

}  // namespace

int init(spank_t sp, int ac, char** av) {
  auto cfg = load_plugin_config(ac, av);
  if (!cfg) {
    slurm_error("%s", cfg.error().c_str());
    return -1;
  }
  g.cfg = *cfg;
  return register_options(sp, true) ? 0 : -1;
}

// Callbacks can fire twice: the argument is kept and parsed from scratch, here only to
// fail early; init_post_opt merges it with GPUDIAG_DIAG.
int diag_option(const char* optarg) {
  g.diag_arg = optarg ? optarg : "";
  auto parsed = parse_diag_list(*g.diag_arg);
  if (!parsed) {
    slurm_error("%s", parsed.error().c_str());
    return -1;
  }
  return 0;
}

int init_post_opt(spank_t) {
  const char* v = std::getenv("GPUDIAG_DIAG");
  auto merged = merge_diag_options(v ? v : "", g.diag_arg);
  if (!merged) {
    slurm_error("%s", merged.error().c_str());
    return -1;
  }
  g.diag = *merged;
  const std::string& named = g.diag.dir;
  if (!named.empty()) {
    // srun runs as the user: a named dir the user cannot write fails here, once.
    if (auto why = judge_named_dir(named, read_named_dir_facts(named))) {
      slurm_error("%s", why->c_str());
      return -1;
    }
  }
  return 0;
}

int local_user_init(spank_t sp) {
  g.have_step = item(sp, S_JOB_ID, g.job_id) && item(sp, S_JOB_STEPID, g.step_id);
  g.job_uid = slurm_compat::srun_job_uid(sp);
  in_allocator::give_job_a_port_salt();
  start_preflight_barrier(sp);
  start_fabric_test(sp);
  return 0;
}

// After the step: what NCCL did, from the logs the tasks wrote (issue 7).
int exit(spank_t) {
  if (!g.diag.enabled || !g.have_step) return 0;
  // The tasks' rule: srun hands them its own directory as $SLURM_SUBMIT_DIR.
  const char* submit = std::getenv("SLURM_SUBMIT_DIR");
  const std::string dir = diag_dir_path(g.diag, submit ? submit : "", current_dir(), g.job_id, g.step_id);
  // The tasks did not use a dir whose name or owner is wrong, and said why; reading it
  // here would print control bytes, or summarize logs a neighbour planted.
  if (!safe_env_value(dir)) return 0;
  // Opened once, as the job's user's private dir, and read only through that fd: a dir
  // checked by path and read by path again could be another user's by the second look
  // (a shared parent lets them make the name appear or swap it in between).
  const DirOpen opened = open_private_dir(dir.c_str(), g.job_uid);
  if (opened.fd < 0) {
    // Missing here: the step made none, or it lives on the nodes only. Nothing is read.
    if (!opened.not_private && opened.err == ENOENT) {
      const std::string unseen = nccl_dir_unseen(dir);
      std::fwrite(unseen.data(), 1, unseen.size(), stderr);
      std::fflush(stderr);
    }
    return 0;
  }
  // A hang first: which rank, where, on which node, from every node's report (issue 31.3).
  std::string text = hang_step_verdict(opened.fd, dir, g.job_uid) + nccl_step_summary(opened.fd, dir, g.job_uid);
  ::close(opened.fd);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  return 0;
}

}  // namespace gpudiag::in_srun
