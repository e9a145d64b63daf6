#pragma once
// What differs between the Slurm releases gpudiag.so is built for, in one place. The
// plugin is compiled against the site's own headers (Slurm loads a plugin only from its
// own major.minor), so SLURM_VERSION_NUMBER says which release this build is for.
// Included only by the plugin module, after <slurm/spank.h>.
#include <unistd.h>

#include <cstdlib>
#include <string>

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

}  // namespace gpudiag::slurm_compat
