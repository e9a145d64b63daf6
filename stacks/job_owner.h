#pragma once
// `gpudiag stacks` run by root: Slurm lets only a job's owner start a step in it
// (root gets "Access/permission denied"), so root looks the owner up and becomes that
// user before it runs srun. The step then runs with exactly the owner's rights.
#include <sys/types.h>

#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

// Pure: the numeric uid `squeue --noheader --format=%U` printed for one job.
Result<uid_t> parse_squeue_uid(std::string_view text, const std::string& job);
// Runs squeue (no shell, with a deadline).
Result<uid_t> job_owner(const std::string& job, double timeout_s);
// setgroups/setgid/setuid to `uid` and its groups, for good; HOME, USER and LOGNAME follow.
Result<bool> become_user(uid_t uid);

}  // namespace gpudiag
