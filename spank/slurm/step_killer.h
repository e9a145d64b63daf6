#pragma once
// When gpudiag refuses a task, the step ends on every node (issues 22 and 17.5). A task
// that fails in task_init is only a non-zero exit to srun, which without
// --kill-on-bad-exit waits for the other tasks: the healthy nodes' ranks start the
// program and wait for the missing rank until torch's rendezvous timeout.
//
// The refusing task marks a page it shares with its slurmstepd (mapped before the tasks
// fork; the program's exec drops it, so no user code ever sees it). Slurmstepd then asks
// slurmctld once to cancel its own step (job and step ids from spank_get_item, never
// anything a task said). When it asks matters: a cancel makes srun stop reading the
// step's output at once (step_launch.c, force_terminated_job), and the refusal, written
// to the task's stderr, may still be on its way. So while no task of this node runs the
// program, the cancel waits for slurm_spank_exit, which slurmstepd calls after it has
// sent the node's output to srun; a task that passes task_init after a refusal on its
// node is refused too. Only when a task of this node already runs the program (and waits
// for the refused rank) is the step ended as the refused task is reaped.
#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag {

// Ends step job.step on every node; "" on success, else why not (Slurm's error text).
using EndStepFn = std::string (*)(std::uint32_t job, std::uint32_t step);

class StepKiller {
 public:
  // When slurmstepd asks: as a task is reaped (task_exit), or once the node's tasks have
  // all ended and their output is out (exit).
  enum class Moment { kTaskReaped, kNodeDone };

  // In slurmstepd, once per step before the tasks fork (user_init). `end` is null where
  // this Slurm has no way to end a step from the plugin. Returns false (and the killer
  // stays off) when no shared page can be mapped.
  bool prepare(EndStepFn end);
  // In the task, when gpudiag refuses it (before task_init returns -1).
  void mark_refused();
  // In the task, as gpudiag lets it start the program (task_init returns 0). False: a task
  // of this node was already refused, so the step is ending; refuse this one too.
  bool mark_started();
  // What the refusing task adds to its message when the step cannot be ended from here
  // ("" when it can).
  std::string fallback_hint() const;
  // In slurmstepd: ends the step once if a task of this node was refused and `when` is
  // the moment for it (above). nullopt: nothing to do or done; a message: it failed.
  std::optional<std::string> end_if_refused(std::uint32_t job, std::uint32_t step, const std::string& node,
                                            Moment when);

 private:
  struct Shared {
    std::uint32_t refused;  // 0: no task of this node refused; 1: one was
    std::uint32_t started;  // how many tasks of this node gpudiag let start the program
  };
  Shared* shared_ = nullptr;
  EndStepFn end_ = nullptr;
  bool ended_ = false;
};

// Whether slurmstepd ends the step at `when` (the rule of the header comment).
bool end_step_now(bool refused, bool a_task_started, StepKiller::Moment when);

std::string end_step_failed_message(std::uint32_t job, std::uint32_t step, const std::string& node,
                                    const std::string& why);

}  // namespace gpudiag
