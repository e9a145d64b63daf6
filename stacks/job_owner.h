#pragma once
// `gpudiag stacks` run by root: Slurm lets only a job's owner start a step in it
// (root gets "Access/permission denied"), so root looks the owner up and runs srun as
// that user. The step then runs with exactly the owner's rights, and srun holds nothing
// of root's (issue 30): spawn_child starts it in a session of its own, without root's
// terminal, files, keyring, cwd or environment, and root's own gpudiag process, which
// the user cannot trace, copies its output.
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"
#include "util/spawn_child.h"

namespace gpudiag {

// Pure: the numeric uid `squeue --noheader --format=%U` printed for one job.
Result<uid_t> parse_squeue_uid(std::string_view text, const std::string& job);
// Runs squeue (no shell, with a deadline).
Result<uid_t> job_owner(const std::string& job, double timeout_s);
// Pure: the environment a program gets that runs as the owner: from ours only what
// says where Slurm is and how to print (PATH, SLURM_CONF, SLURM_CLUSTERS, LANG,
// LANGUAGE, LC_*, TZ), and the owner's HOME, USER and LOGNAME. Root's other variables
// (tokens, agent sockets) would be readable in /proc/PID/environ by the owner.
std::vector<std::string> owner_environment(const std::vector<std::string>& ours, const std::string& name,
                                           const std::string& home);
// Who `uid` is (its gid, its groups, that environment), for spawn_child.
Result<ChildUser> owner_credentials(uid_t uid, const std::vector<std::string>& our_env);

}  // namespace gpudiag
