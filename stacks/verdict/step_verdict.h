#pragma once
// srun's end-of-step hang verdict (issue 31.3): every node's hang report in the diag dir
// merged into classes, with what torch's flight recorder dumped there, judged, and
// printed in at most five lines. Empty when no node wrote a hang report. Never throws.
#include <sys/types.h>

#include <string>

#include "stacks/verdict/hang_verdict.h"

namespace gpudiag {

// The gathering half: every node's report and every rank's flight-recorder dump in
// `diag_dir` that belongs to `owner`, merged; skipped files become findings.
// `diag_dir` names the dir in the verdict's words; `dir_fd` is the dir itself, opened
// once by the caller (srun: as the user's private dir), and every file is read relative
// to it.
VerdictInputs gather_verdict_inputs(int dir_fd, const std::string& diag_dir, uid_t owner);
// The same by path (the CLI, on a dir the user names): opened once, never through a link.
VerdictInputs gather_verdict_inputs(const std::string& diag_dir, uid_t owner);

std::string hang_step_verdict(int dir_fd, const std::string& diag_dir, uid_t owner);
std::string hang_step_verdict(const std::string& diag_dir, uid_t owner);

}  // namespace gpudiag
