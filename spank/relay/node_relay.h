#pragma once
// The node's output relay (ARCHITECTURE §3): one thread in slurmstepd tags the lines of
// every local task, so that a task is the user program itself and nothing more. A relay
// process per task (output_relay.h) cost each task a fork and a teardown of a copy of
// slurmstepd, the largest part of gpudiag's launch time (docs/BENCHMARKS.md); the program
// as slurmstepd's own child also gets every signal and keeps its exit status as Slurm
// sees it, under any ProctrackType.
//
// user_init opens its socket before the tasks fork, task_post_fork starts the thread before
// they run (open, start_thread); each task hands it Slurm's stdout
// and stderr and the read ends of two new pipes (node_relay_wire.h) and execs the program
// with the pipes as fds 1 and 2. The thread owns Slurm's fds from then on and closes each
// when its pipe reaches EOF: slurmstepd kills what is left of the step before it waits
// for the output (mgr.c: the container's SIGKILL, then _wait_for_io), so no program keeps
// the thread waiting for long (and a child that outlives its task gets the per-task
// relay's drain limit, task_exited). It never blocks: writes wait for POLLOUT, and a stream with bytes
// pending is not read until they are out, so a slow srun holds back that task alone. What
// it holds is bounded whatever the pipes hold (issue 30.3): it reads no more than fits
// kRelayStreamBudget after tagging, and kRelayStepBudget across the step's streams; the
// rest waits in the task's pipe, the user's memory, not root's.
// The hang watchdog needs a process beside the program, so a watched step keeps the
// relay per task.
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>
#include <string_view>

#include "spank/relay/output_relay.h"

namespace gpudiag {

class NodeRelay {
 public:
  NodeRelay() = default;
  // Stops and joins the thread in the process that started it; a forked copy (a task
  // that exits before its exec) does nothing, since the thread is not there.
  ~NodeRelay();
  NodeRelay(const NodeRelay&) = delete;
  NodeRelay& operator=(const NodeRelay&) = delete;

  // Opens the socket the tasks hand their streams to, before slurmstepd forks them (they
  // inherit it); a message when it cannot (the tasks then relay themselves).
  // local_tasks: how many tasks this node runs (0: unknown; see task_exited).
  std::optional<std::string> open(int local_tasks = 0);
  // Starts the thread on the open socket: from task_post_fork, once slurmstepd has forked
  // every task and before it lets them run (mgr.c, _fork_all_tasks), so that no fork
  // copies a process with the thread, its stack and its malloc arena (BENCHMARKS "A launch
  // as cheap as pyxis"). Once; a message when it cannot, and the socket then refuses every
  // handoff at once (each task relays itself) instead of leaving it unanswered.
  std::optional<std::string> start_thread();
  // Both: for a relay with no fork in between (tests).
  std::optional<std::string> start(int local_tasks = 0);
  // Whether a task may hand over its streams: the socket is open, and the thread runs or
  // starts before the task does. True in a forked task too, which has no thread itself.
  bool accepting() const { return task_end_ >= 0 && !refused_; }
  bool running() const { return started_; }
  // Where a task hands over its streams (hand_to_node_relay). Close-on-exec: the program
  // never holds it.
  int task_socket() const { return task_end_; }
  // From slurm_spank_task_exit: the task's program is gone. Once every local task is
  // (each one alone when start had no count), the pipes get the per-task relay's drain
  // limit (quiet 0.2 s, at most 5 s), so that a child that kept them open does not hold the
  // step's output open; until then they are relayed to EOF, as slurmstepd does.
  void task_exited(int local_id);
  // Relays what the pipes hold now, drops the rest, closes everything and joins (closes
  // the socket alone where the thread never started). Called from slurm_spank_exit, after
  // slurmstepd has waited for the step's output.
  void stop();
  // The most output the thread has held at once, in bytes of its buffers' capacity (what
  // kRelayStepBudget counts): tests check the bound with it.
  std::size_t peak_held() const { return peak_held_.load(); }

 private:
  static void* thread_main(void* self);
  int relay_end_ = -1, task_end_ = -1;  // the socketpair
  int stop_r_ = -1, stop_w_ = -1;
  pthread_t thread_{};
  pid_t owner_ = 0;
  int local_tasks_ = 0;
  bool opened_ = false;
  bool started_ = false;
  bool refused_ = false;  // the thread could not start: handoffs fail at once
  std::atomic<bool> stop_requested_{false};
  std::atomic<std::size_t> peak_held_{0};
};

// In a task, before its exec: fds 1 and 2 (as `plan` names them) now lead to the node's
// relay. nullopt on success; on failure nothing has changed and the result says why.
std::optional<std::string> hand_to_node_relay(int task_socket, const RelayPlan& plan, int local_id);
// Its two halves. The message for `plan` (node_relay_wire.h), which user_init makes ahead for
// a prepared task (nullopt: the plan is out of the wire's range), and the handoff with a
// message made so, which builds no string on success.
std::optional<std::string> handoff_message(const RelayPlan& plan, int local_id);
std::optional<std::string> hand_over_streams(int task_socket, std::string_view message, bool out, bool err);

}  // namespace gpudiag
