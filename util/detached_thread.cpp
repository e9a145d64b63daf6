#include "util/detached_thread.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <exception>
#include <thread>

namespace gpudiag {
namespace {

// A new thread inherits the mask of the one that creates it.
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

}  // namespace

std::string start_detached_thread(std::function<void()> body) {
  // Linked into the plugin: this function's own object is the one srun would unload.
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&start_detached_thread), &self) && self.dli_fname)
    ::dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  EverySignalBlocked blocked;
  try {
    std::thread(std::move(body)).detach();
  } catch (const std::exception& e) {
    return std::string("no thread: ") + e.what();
  }
  return "";
}

bool run_in_own_arena(const std::function<void()>& body) {
  std::thread thread;
  {
    EverySignalBlocked blocked;
    try {
      thread = std::thread(body);
    } catch (const std::exception&) {
      return false;
    }
  }
  thread.join();
  return true;
}

}  // namespace gpudiag
