#pragma once
// When gpudiag refuses a task, the step ends on every node (issues 22 and 17.5). A task
// that fails in task_init is only a non-zero exit to srun, which without
// --kill-on-bad-exit waits for the other tasks: the healthy nodes' ranks start the
// program and wait for the missing rank until torch's rendezvous timeout.
//
// The refusing task marks a page it shares with its slurmstepd (mapped before the tasks
// fork; the program's exec drops it, so no user code ever sees it). When the stepd reaps
// that task, it asks slurmctld once to cancel its own step (job and step ids from
// spank_get_item, never anything a task said). The refusal message was written to the
// task's stderr before it exited, so it is on its way to srun before any other task is
// signalled.
#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag {

// Ends step job.step on every node; "" on success, else why not (Slurm's error text).
using EndStepFn = std::string (*)(std::uint32_t job, std::uint32_t step);

class StepKiller {
 public:
  // In slurmstepd, once per step before the tasks fork (user_init). `end` is null where
  // this Slurm has no way to end a step from the plugin. Returns false (and the killer
  // stays off) when no shared page can be mapped.
  bool prepare(EndStepFn end);
  // In the task, when gpudiag refuses it (before task_init returns -1).
  void mark_refused();
  // What the refusing task adds to its message when the step cannot be ended from here
  // ("" when it can).
  std::string fallback_hint() const;
  // In slurmstepd, each time a task is reaped: the first time a task of this node was
  // refused, ends the step. nullopt: nothing to do or done; a message: it failed.
  std::optional<std::string> end_if_refused(std::uint32_t job, std::uint32_t step, const std::string& node);

 private:
  volatile std::uint32_t* shared_ = nullptr;  // 0: no refusal; 1: a task was refused
  EndStepFn end_ = nullptr;
  bool ended_ = false;
};

std::string end_step_failed_message(std::uint32_t job, std::uint32_t step, const std::string& node,
                                    const std::string& why);

}  // namespace gpudiag
