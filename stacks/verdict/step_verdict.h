#pragma once
// srun's end-of-step hang verdict (issue 31.3): every node's hang report in the diag dir
// merged into classes, judged, and printed in at most five lines. Empty when no node
// wrote a hang report. Never throws.
#include <sys/types.h>

#include <string>

namespace gpudiag {

std::string hang_step_verdict(const std::string& diag_dir, uid_t owner);

}  // namespace gpudiag
