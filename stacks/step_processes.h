#pragma once
// The processes of a Slurm job step on this node, found the way a user can: by the
// SLURM_JOB_ID and SLURM_STEP_ID in /proc/PID/environ (readable for one's own
// processes). The topmost ones are the task processes.
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nodeinfo/result.h"

namespace gpudiag {

struct StepId {
  std::string job;                  // digits
  std::optional<std::string> step;  // digits, or nullopt: every step
};
// "1234" or "1234.0"; anything else is an error message.
Result<StepId> parse_step_id(std::string_view text);

// Pure: the value of `name` in a NUL-separated environ block.
std::optional<std::string> environ_value(std::string_view environ, std::string_view name);

struct StepTask {
  pid_t pid = 0;
  int rank = -1;     // SLURM_PROCID, -1 when absent
  std::string step;  // SLURM_STEP_ID
};
// Tasks of the step on this node, except `skip_step` (the step asking).
std::vector<StepTask> find_step_tasks(const StepId& id, const std::string& skip_step);

}  // namespace gpudiag
