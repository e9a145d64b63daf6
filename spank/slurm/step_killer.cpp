#include "spank/slurm/step_killer.h"

#include <sys/mman.h>

namespace gpudiag {

bool StepKiller::prepare(EndStepFn end) {
  end_ = end;
  ended_ = false;
  if (shared_) {
    *shared_ = 0;  // a second step in the same stepd does not exist, but stay correct
    return true;
  }
  void* p = ::mmap(nullptr, sizeof(std::uint32_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  shared_ = static_cast<volatile std::uint32_t*>(p);
  *shared_ = 0;
  return true;
}

void StepKiller::mark_refused() {
  if (shared_) __atomic_store_n(shared_, 1u, __ATOMIC_SEQ_CST);
}

std::string StepKiller::fallback_hint() const {
  if (end_ && shared_) return "";
  return " (gpudiag cannot end the step on the other nodes with this Slurm: their tasks go on until the step "
         "ends; srun --kill-on-bad-exit ends it at once)";
}

std::optional<std::string> StepKiller::end_if_refused(std::uint32_t job, std::uint32_t step,
                                                      const std::string& node) {
  if (!shared_ || !end_ || ended_ || __atomic_load_n(shared_, __ATOMIC_SEQ_CST) == 0) return std::nullopt;
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
