#pragma once
// A thread that srun's plugin starts and never joins (the preflight barrier's server, the
// fabric coordinator): srun may exit, and unload its plugins (dlclose), while the thread
// still waits on its deadline.
#include <functional>
#include <string>

namespace gpudiag {

// Runs `body` on a detached thread with every signal blocked (srun's signals stay with
// srun's own threads), keeping the shared object that holds this code mapped until the
// process ends. "" or why there is no thread; `body` must not throw.
std::string start_detached_thread(std::function<void()> body);

}  // namespace gpudiag
