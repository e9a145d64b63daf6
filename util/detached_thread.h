#pragma once
// Threads the plugin starts with every signal blocked (the host's signals stay with its own
// threads). One that srun starts and never joins (the preflight barrier's server, the
// fabric coordinator): srun may exit, and unload its plugins (dlclose), while the thread
// still waits on its deadline. One that slurmstepd joins at once, for where its memory
// lies: glibc gives a new thread a malloc arena of its own, so what it allocates before
// the tasks fork stays off slurmstepd's main heap, where Slurm's own allocations in each
// forked task would meet it and copy its pages (a third fewer page faults per launch:
// docs/BENCHMARKS.md, "A launch as cheap as pyxis").
#include <signal.h>

#include <functional>
#include <string>

namespace gpudiag {

// While it lives, this thread blocks every signal, so a thread started meanwhile inherits
// that mask (a new thread inherits its creator's) and takes none of the host's (glibc keeps its own set-uid signal deliverable).
// Every thread the plugin starts in srun or slurmstepd starts under one.
class EverySignalBlocked {
 public:
  EverySignalBlocked() {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~EverySignalBlocked() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  EverySignalBlocked(const EverySignalBlocked&) = delete;
  EverySignalBlocked& operator=(const EverySignalBlocked&) = delete;

 private:
  sigset_t old_;
};

// Runs `body` on a thread of its own with every signal blocked, on a 512 KiB stack that is
// unmapped after the join, and waits for it. false: no thread could start (no pid, thread
// or memory left), and `body` did not run. `body` must not throw.
bool run_in_own_arena(const std::function<void()>& body);

// Runs `body` on a detached thread with every signal blocked (srun's signals stay with
// srun's own threads), keeping the shared object that holds this code mapped until the
// process ends. "" or why there is no thread; `body` must not throw.
std::string start_detached_thread(std::function<void()> body);

}  // namespace gpudiag
