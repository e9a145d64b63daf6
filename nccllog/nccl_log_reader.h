#pragma once
// Feeds files and directories of NCCL logs to the analyzer in fixed-size chunks, so a
// multi-GB TRACE log costs a 1 MiB buffer, not its size.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nccllog/nccl_log_analyzer.h"

namespace gpudiag {

struct ReadLimits {
  std::uint64_t max_total_bytes = 0;   // 0: read everything
  std::size_t max_line = 64 * 1024;    // longer lines are cut here (NCCL's are < 1 KiB)
};

// A directory contributes its regular files named nccl* or *.log (not recursive);
// a file named on the command line is always read. Unreadable paths are recorded
// in the analysis, not thrown.
void read_nccl_logs(NcclLogAnalyzer& a, const std::vector<std::string>& paths, const ReadLimits& limits = {});

// The logs in a dir the caller opened once (srun's diag dir, as the user's private dir):
// the same names, each opened relative to `dir_fd` without following a link or blocking,
// and read only when it is a regular file of `owner` (util/private_file.h rule 6); any
// other is skipped without a word, as a planted name says nothing of the step. `shown`
// names the dir in the analysis. The fd stays the caller's.
void read_nccl_logs_in_dir(NcclLogAnalyzer& a, int dir_fd, const std::string& shown, uid_t owner,
                           const ReadLimits& limits = {});

// Whether `dir_fd` holds a log NCCL_DEBUG_FILE names as gpudiag sets it (nccl.*).
bool has_nccl_logs(int dir_fd);

}  // namespace gpudiag
