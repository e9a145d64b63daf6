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
// to the task's stderr, may still be on its way. So the cancel waits for slurm_spank_exit,
// which slurmstepd calls after it has sent the node's output to srun, unless a task of
// the node is "running": it runs the program, or waits for other nodes (the preflight's
// fabric test and barrier), and would hold the step until it gives up. Then the step is
// ended as the refused task is reaped. A task that would run after a refusal on its node
// is refused too, uncounted: the step is ending. A task stops counting when it is refused
// after all, and when slurmstepd reaps it (its program ended).
//
// At exit the node's output has left slurmstepd, but Slurm says nothing of when srun has
// printed it: srun's I/O thread prints what arrives at once, unless it waits for a core
// while srun's main thread takes the cancel and exits (26.05 under the suite's load lost
// the line once that way). So every cancel comes after a grace, kSrunGrace_s: at exit, and
// as a refused task is reaped beside a running one, where the refused task's line has only
// just been written (a node where only task 1 fails its preflight while task 0 waits at
// the barrier: adversary review 16), after the lines other tasks of the node claimed
// are out (the task that claimed a line may still be writing it: adversary review 17).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag {

// How long a cancel waits for srun to print what the node sent: only a refused step pays
// it, once, on the refusing node.
inline constexpr double kSrunGrace_s = 0.25;

// Ends step job.step on every node; "" on success, else why not (Slurm's error text).
using EndStepFn = std::string (*)(std::uint32_t job, std::uint32_t step);

class StepKiller {
 public:
  // When slurmstepd asks: as a task is reaped (task_exit), or once the node's tasks have
  // all ended and their output is out (exit).
  enum class Moment { kTaskReaped, kNodeDone };

  // In slurmstepd, once per step before the tasks fork (user_init). `end` is null where
  // this Slurm has no way to end a step from the plugin; `grace_s`, the wait before a
  // cancel (kSrunGrace_s). Returns false (and the killer stays off) when no
  // shared page can be mapped.
  bool prepare(EndStepFn end, double grace_s = 0);
  // In the task, when gpudiag refuses it (before task_init returns -1).
  void mark_refused();
  // In the task `local_id`, before it starts the program or waits for other nodes: counts
  // it as running (once; again is a no-op). False: a task of this node was refused
  // already, so the step is ending; refuse this one too. It is then not counted.
  bool mark_running(int local_id);
  // In the task: one that mark_running counted is refused after all.
  void unmark_running();
  // In slurmstepd, as task `local_id` is reaped (before end_if_refused): it runs no more.
  void task_reaped(int local_id);
  // In a task that fails its own checks, for each problem `line`: whether it is the first
  // task of its node to find it, and so says it, whichever task that is; it then calls
  // done_saying once the line is written. A problem only task 1 sees (its own
  // CUDA_VISIBLE_DEVICES) is said, and eight tasks failing alike say it once. Past
  // kSaidSlots different lines (the page is full) and without the page, local task 0 says.
  // The lines are told apart by a 64-bit hash keyed with a secret of the step (prepare),
  // so that no text the user chose can be made to hide another line (adversary 17).
  bool first_to_say(std::string_view line, int local_id);
  // The line first_to_say let this task say is out. A cancel waits (at most
  // kSayingWait_s) for the lines claimed on its node to be out, then the grace.
  void done_saying();
  // How many different problem lines a node's tasks say once each; and the local ids that
  // have a slot in the count (a task past them counts until the step ends).
  static constexpr std::size_t kSaidSlots = 16;
  static constexpr std::size_t kTaskSlots =
      4096 - 2 * sizeof(std::uint32_t) - kSaidSlots * sizeof(std::uint64_t);
  static constexpr double kSayingWait_s = 1.0;
  // What the refusing task adds to its message when the step cannot be ended from here
  // ("" when it can).
  std::string fallback_hint() const;
  // In slurmstepd: ends the step once if a task of this node was refused and `when` is
  // the moment for it (above). nullopt: nothing to do or done; a message: it failed.
  std::optional<std::string> end_if_refused(std::uint32_t job, std::uint32_t step, const std::string& node,
                                            Moment when);

 private:
  // One page. `word` holds both, so that a task reads the refusal and counts itself in
  // one step: bit 0, a task of this node was refused; the bits above, how many tasks run.
  // `counted[id]`: task id is in that count, so that its reap takes it out. A task past
  // the slots is counted until the step ends, as if its program ran on.
  // `saying`: lines claimed by first_to_say and not yet out (done_saying). `said`: the keyed
  // hash of each problem line a task of this node said; 0: free.
  struct Shared {
    std::uint32_t word;
    std::uint32_t saying;
    std::uint64_t said[kSaidSlots];
    std::uint8_t counted[kTaskSlots];
  };
  static_assert(sizeof(Shared) == 4096, "one page");
  Shared* shared_ = nullptr;
  EndStepFn end_ = nullptr;
  double grace_s_ = 0;
  bool ended_ = false;  // slurmstepd: asked slurmctld already
  int counted_ = -1;    // a task: its local id once mark_running counted it
  std::uint64_t key_ = 0;  // the said lines' hash key: the step's secret, from prepare
  int claimed_ = 0;        // a task: lines it claimed and has not said yet
};

// Under the preflight, whether a task counts as running from before its fabric test on:
// only when it will wait for other nodes, so a node that fails its own checks (every task
// fails them, none waits) is not cancelled before its line is out (adversary review 14).
bool waits_for_other_nodes(bool passed_own_checks, bool fabric_test);

// Whether slurmstepd ends the step at `when` (the rule of the header comment).
bool end_step_now(bool refused, bool a_task_runs, StepKiller::Moment when);

std::string end_step_failed_message(std::uint32_t job, std::uint32_t step, const std::string& node,
                                    const std::string& why);

}  // namespace gpudiag
