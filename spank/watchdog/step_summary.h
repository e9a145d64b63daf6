#pragma once
// What srun prints when a --diag step ends: one line on what NCCL did, drawn from the
// NCCL_DEBUG_FILE logs in the diag dir.
#include <string>

namespace gpudiag {

// The text to print (one or more lines, each starting "gpudiag: "). Reads at most
// a bounded amount of log so that srun never lingers over a huge TRACE log.
std::string nccl_step_summary(const std::string& diag_dir);

}  // namespace gpudiag
