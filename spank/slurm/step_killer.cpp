#include "spank/slurm/step_killer.h"

#include <sys/mman.h>

namespace gpudiag {

bool StepKiller::prepare(EndStepFn end) {
  end_ = end;
  ended_ = false;
  if (!shared_) {
    void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    shared_ = static_cast<Shared*>(p);
  }
  // A second step in the same stepd does not exist, but stay correct.
  __atomic_store_n(&shared_->refused, 0u, __ATOMIC_SEQ_CST);
  __atomic_store_n(&shared_->started, 0u, __ATOMIC_SEQ_CST);
  return true;
}

void StepKiller::mark_refused() {
  if (shared_) __atomic_store_n(&shared_->refused, 1u, __ATOMIC_SEQ_CST);
}

// Count first, then look: either this task sees the refusal, or the refusing task's
// stepd (which reads the count after that task set the flag and exited) sees this task.
bool StepKiller::mark_started() {
  if (!shared_) return true;
  __atomic_add_fetch(&shared_->started, 1u, __ATOMIC_SEQ_CST);
  return __atomic_load_n(&shared_->refused, __ATOMIC_SEQ_CST) == 0;
}

std::string StepKiller::fallback_hint() const {
  if (end_ && shared_) return "";
  return " (gpudiag cannot end the step on the other nodes with this Slurm: their tasks go on until the step "
         "ends; srun --kill-on-bad-exit ends it at once)";
}

bool end_step_now(bool refused, bool a_task_started, StepKiller::Moment when) {
  if (!refused) return false;
  return when == StepKiller::Moment::kNodeDone || a_task_started;
}

std::optional<std::string> StepKiller::end_if_refused(std::uint32_t job, std::uint32_t step,
                                                      const std::string& node, Moment when) {
  if (!shared_ || !end_ || ended_) return std::nullopt;
  const bool refused = __atomic_load_n(&shared_->refused, __ATOMIC_SEQ_CST) != 0;
  const bool a_task_started = __atomic_load_n(&shared_->started, __ATOMIC_SEQ_CST) != 0;
  if (!end_step_now(refused, a_task_started, when)) return std::nullopt;
  ended_ = true;  // once per node, whatever the answer: a refused RPC is not retried per task
  std::string why = end_(job, step);
  if (why.empty()) return std::nullopt;
  return end_step_failed_message(job, step, node, why);
}

std::string end_step_failed_message(std::uint32_t job, std::uint32_t step, const std::string& node,
                                    const std::string& why) {
  return "gpudiag: a task of step " + std::to_string(job) + "." + std::to_string(step) + " was refused on " + node +
         ", but slurmctld did not end the step on the other nodes (" + why +
         "): they go on until the step ends; srun --kill-on-bad-exit ends it at once";
}

}  // namespace gpudiag
