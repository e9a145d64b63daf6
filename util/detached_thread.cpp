#include "util/detached_thread.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <exception>
#include <thread>

namespace gpudiag {

std::string start_detached_thread(std::function<void()> body) {
  // Linked into the plugin: this function's own object is the one srun would unload.
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&start_detached_thread), &self) && self.dli_fname)
    ::dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  std::string error;
  try {
    std::thread(std::move(body)).detach();
  } catch (const std::exception& e) {
    error = std::string("no thread: ") + e.what();
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return error;
}

}  // namespace gpudiag
