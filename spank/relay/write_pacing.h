#pragma once
// When the node's relay thread writes again to a Slurm pipe it found full (node_relay.h).
//
// While srun is the slower side, slurmstepd reads a task's pipe in pieces of about 1 KiB
// and each page it empties makes the pipe writable again: a thread that polls for that
// wakes once per page it can write, 4 KiB of output per wake-up, and on the 3-node test
// cluster those wake-ups were about half of the relay thread's CPU. So after a write that
// found the pipe full the thread waits a while before it polls that pipe again, and learns
// how long from what the pipe still holds when it comes back: more than half of it (it
// came back early: wait twice as long), less than a quarter (the reader may soon run dry:
// half as long), empty (the reader waited for us: poll at once again). Never longer than
// kMaxWait, so a line waits at most that much more than it would in a full pipe anyway,
// and a reader that is fast again is caught within a few writes. The wait only delays
// the next poll for room, so a stopped srun costs no wake-up at all.
#include <cstddef>

namespace gpudiag {

class WritePacing {
 public:
  static constexpr double kFirstWait = 100e-6;  // seconds
  static constexpr double kMaxWait = 10e-3;

  // The thread came back to a pipe it had found full: it holds `queued` of its `capacity`
  // bytes now.
  void came_back(std::size_t queued, std::size_t capacity);
  // How long to wait after the next write that finds the pipe full; 0: poll at once.
  double wait() const { return wait_; }

 private:
  double wait_ = 0;
};

}  // namespace gpudiag
