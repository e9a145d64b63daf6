#pragma once
// What srun prints when a --diag step ends: one line on what NCCL did, drawn from the
// NCCL_DEBUG_FILE logs in the diag dir.
#include <sys/types.h>

#include <string>

namespace gpudiag {

// The text to print (one or more lines, each starting "gpudiag: "). Reads at most
// a bounded amount of log so that srun never lingers over a huge TRACE log.
// `dir_fd` is the diag dir, opened once by the caller as the user's private dir; only
// `owner`'s logs in it are read, relative to the fd. `diag_dir` names it in the text.
std::string nccl_step_summary(int dir_fd, const std::string& diag_dir, uid_t owner);

// The text for a diag dir that srun's host does not have: where to look instead.
std::string nccl_dir_unseen(const std::string& diag_dir);

}  // namespace gpudiag
