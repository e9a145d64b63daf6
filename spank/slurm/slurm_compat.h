#pragma once
// What differs between the Slurm releases gpudiag.so is built for, in one place. The
// plugin is compiled against the site's own headers (Slurm loads a plugin only from its
// own major.minor), so SLURM_VERSION_NUMBER says which release this build is for.
// Included only by the plugin module, after <slurm/spank.h>.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

namespace gpudiag::slurm_compat {

// The first host of a Slurm hostlist ("gpu[001-004]" -> "gpu001"), resolved inside srun
// and slurmstepd without linking libslurm. 23.11 turned hostlist_t into a struct taken
// by pointer (slurm_hostlist_create returns hostlist_t *); `auto` holds either.
inline std::string first_host(const std::string& nodelist) {
  if (nodelist.empty()) return "";
  auto hl = slurm_hostlist_create(nodelist.c_str());
  if (!hl) return "";
  char* host = slurm_hostlist_shift(hl);
  std::string out = host ? host : "";
  std::free(host);
  slurm_hostlist_destroy(hl);
  return out;
}

// The job's user as srun sees it. 22.05's srun answers S_JOB_UID with the job's uid
// (which differs from srun's own under `srun --uid`); 24.11's srun (seen on 24.11.5)
// answers SLURM_AUTH_NOBODY (99), a placeholder, and has no --uid: there the job's
// user is srun's own. (23.11 and 24.05 are not tested here; where S_JOB_UID is right,
// the check changes nothing.)
inline uid_t srun_job_uid(spank_t sp) {
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) return ::getuid();
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
  constexpr uid_t kSlurmAuthNobody = 99;
  if (uid == kSlurmAuthNobody) return ::getuid();
#endif
  return uid;
}

// libslurm's slurm_kill_job_step, found at run time in slurmstepd (its libslurmfull
// exports it: 22.05, 24.11 and 26.05 checked), so a Slurm without it loads the plugin all
// the same. The type comes from this build's own slurm.h: 24.11 added a flags argument (0
// keeps the old meaning); 26.05 takes the step as a slurm_step_id_t * (job id, step id, and
// the step's SLUID, left 0 as SLURM_STEP_ID_INITIALIZER does: slurmctld then finds the
// step by its ids). SIGKILL makes slurmctld cancel the step, which srun reports and ends on
// every node; a signal other than SIGKILL only signals tasks.
using KillJobStep = decltype(&::slurm_kill_job_step);

inline KillJobStep kill_job_step_symbol() {
  return reinterpret_cast<KillJobStep>(::dlsym(RTLD_DEFAULT, "slurm_kill_job_step"));
}

// A template, so that only the branch this slurm.h declares is compiled.
template <class F>
int call_kill_job_step(F kill, std::uint32_t job, std::uint32_t step) {
  if constexpr (std::is_invocable_v<F, slurm_step_id_t*, std::uint16_t, std::uint16_t>) {
    slurm_step_id_t id{};  // sluid 0, as SLURM_STEP_ID_INITIALIZER (a C compound literal)
    id.job_id = job;
    id.step_id = step;
    id.step_het_comp = NO_VAL;
    return kill(&id, SIGKILL, 0);
  } else if constexpr (std::is_invocable_v<F, std::uint32_t, std::uint32_t, std::uint16_t, std::uint16_t>) {
    return kill(job, step, SIGKILL, 0);
  } else {
    return kill(job, step, SIGKILL);
  }
}

// Ends job.step on every node: "" on success, else Slurm's reason. Call only from
// slurmstepd's main process (not a forked task), with the step's own ids.
inline std::string end_step(std::uint32_t job, std::uint32_t step) {
  static const KillJobStep kill = kill_job_step_symbol();
  if (!kill) return "this Slurm has no slurm_kill_job_step";
  const int rc = call_kill_job_step(kill, job, step);
  // Already over (every node refused, srun gone): what was asked for holds.
  if (rc == 0 || errno == ESLURM_ALREADY_DONE) return "";
  const char* text = slurm_strerror(errno);
  return text ? text : "error " + std::to_string(errno);
}

}  // namespace gpudiag::slurm_compat
