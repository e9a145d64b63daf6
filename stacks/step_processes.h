#pragma once
// The processes of a Slurm job step on this node, as Slurm's own records have them
// (`scontrol listpids`, which asks the node's slurmstepd): a process cannot join a job
// by putting SLURM_JOB_ID in its environment. The topmost ones are the task processes.
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nodeinfo/proc_tree.h"
#include "util/result.h"

namespace gpudiag {

// The relay's SIGURG listener (spank/watchdog/hang_spread.h), a child of the relay that is not part
// of the program: the task's stacks leave it out.
constexpr const char* kSpreadListenerName = "gpudiag-hangsig";  // its comm: 15 bytes at most

struct StepId {
  std::string job;                  // digits
  std::optional<std::string> step;  // digits, or nullopt: every step
};
// "1234" or "1234.0"; anything else is an error message.
Result<StepId> parse_step_id(std::string_view text);

// Pure: the value of `name` in a NUL-separated environ block.
std::optional<std::string> environ_value(std::string_view environ, std::string_view name);

// One row of `scontrol listpids`: "PID JOBID STEPID LOCALID GLOBALID", the ids "-"
// for processes other than the task processes slurmstepd started.
struct ListedPid {
  pid_t pid = 0;
  std::string job, step;  // step: "0", "batch", "extern", ...
  int global_id = -1;     // the task's rank, -1 for "-"
};
// Pure: parses its output; a row that is not five such columns is an error.
Result<std::vector<ListedPid>> parse_listpids(std::string_view text);
// Runs `scontrol listpids JOB` (no shell, with a deadline) on this node.
Result<std::vector<ListedPid>> list_job_pids(const std::string& job, double timeout_s);

struct StepTask {
  pid_t pid = 0;
  int rank = -1;     // the task's global id, -1 when Slurm did not say
  std::string step;  // "0", "batch", ...
};
// Pure: the task processes among Slurm's pids of `id`, except those of `skip_step`
// (the step asking). A task process that is a fork of slurmstepd (gpudiag's output
// relay: same comm as its parent, no exec) stands for its children, the program.
std::vector<StepTask> step_task_roots(const std::vector<ListedPid>& listed, const ProcTable& table, const StepId& id,
                                      const std::string& skip_step);

}  // namespace gpudiag
