#pragma once
// File work that may block without end in the kernel (a hung NFS server, a frozen
// filesystem) done in a forked child, so that the caller gives up at a deadline and
// still exits. A thread would not do: a thread stuck in an uninterruptible wait holds
// the whole process, its exit included, and so whoever waits for it (NHC, slurmd).
#include <cstddef>
#include <functional>
#include <string>

namespace gpudiag {

struct ChildAnswer {
  bool finished = false;  // false: the deadline passed (or no child could be made; see error)
  std::string bytes;      // what the child wrote to `out`, at most max_bytes
  std::string error;      // why there is no answer, for a message
};

// Runs work(out) in a child and reads what it writes to `out` until it exits or
// `timeout_s` passes; then the child gets SIGKILL and is left behind (it ends when the
// kernel lets go of it). `work` runs between fork and _exit while the caller may have
// other threads: async-signal-safe calls only (plain syscalls: no malloc, no locks, no
// stdio; prepare every string before). The child's stdin, stdout and stderr are
// /dev/null and it keeps no other fd of the caller's, so a child left behind holds no
// pipe that someone reads to the end.
ChildAnswer run_in_child_until(double timeout_s, std::size_t max_bytes, const std::function<void(int out)>& work);

// For work(): writes all of `size` bytes to fd (async-signal-safe); false on an error.
bool write_whole(int fd, const void* data, std::size_t size);

}  // namespace gpudiag
