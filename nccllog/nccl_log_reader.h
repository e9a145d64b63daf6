#pragma once
// Feeds files and directories of NCCL logs to the analyzer in fixed-size chunks, so a
// multi-GB TRACE log costs a 1 MiB buffer, not its size.
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

}  // namespace gpudiag
