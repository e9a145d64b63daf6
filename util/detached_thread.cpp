#include "util/detached_thread.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstddef>
#include <exception>
#include <thread>

namespace gpudiag {

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

namespace {

void* run_body(void* body) {
  (*static_cast<const std::function<void()>*>(body))();
  return nullptr;
}

// The thread's stack is ours, and gone after the join: glibc keeps the stacks it made
// itself for later threads, and such an 8 MiB private mapping left in slurmstepd would be
// charged again to every task's fork where overcommit is strict (adversary review 7). The
// frames on this thread are small (the largest, SpankEnv::get's, 8 KiB); a page below the
// stack stays PROT_NONE as a guard.
constexpr std::size_t kOwnArenaStack = 512 * 1024;
constexpr std::size_t kGuard = 4096;

}  // namespace

bool run_in_own_arena(const std::function<void()>& body) {
  void* map = ::mmap(nullptr, kOwnArenaStack + kGuard, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) return false;
  ::mprotect(map, kGuard, PROT_NONE);
  pthread_attr_t attr;
  ::pthread_attr_init(&attr);
  ::pthread_attr_setstack(&attr, static_cast<char*>(map) + kGuard, kOwnArenaStack);
  pthread_t thread;
  int rc;
  {
    EverySignalBlocked blocked;
    rc = ::pthread_create(&thread, &attr, &run_body, const_cast<std::function<void()>*>(&body));
  }
  ::pthread_attr_destroy(&attr);
  if (rc == 0) ::pthread_join(thread, nullptr);  // fails only for a thread that is not ours
  ::munmap(map, kOwnArenaStack + kGuard);
  return rc == 0;
}

}  // namespace gpudiag
