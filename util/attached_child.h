#pragma once
// Runs a program through spawn_child and copies its stdout and stderr to ours while it
// runs (issue 30): `gpudiag stacks` shows srun's output on the caller's terminal without
// handing srun that terminal. The bytes are the child's, and a child that runs as a user
// is that user's to trace and steer, so they are untrusted: every control byte but
// newline and tab is escaped (util/control_bytes.h) before it is written. What this side
// holds is bounded: one read of kCopyChunk bytes at a time, written out (escaped, at most
// 4 bytes for each) before the next read, so a child that floods waits on its pipe.
// SIGINT, SIGTERM, SIGHUP and SIGQUIT that reach us while it runs are passed on to it as
// SIGTERM; a second one as SIGKILL.
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/spawn_child.h"

namespace gpudiag {

constexpr std::size_t kCopyChunk = 64 * 1024;

// Pure: a stream's bytes, chunk by chunk, escaped; a UTF-8 lead byte at a chunk's end
// waits for the next chunk, so a C1 control split across two reads is still escaped.
class EscapedStream {
 public:
  std::string feed(std::string_view bytes);
  std::string finish();  // what was held back at the stream's end

 private:
  std::string held_;
};

struct AttachedResult {
  bool started = false;
  std::string error;   // why it did not start
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
};

// Starts argv (as `as` where given), copies its output to to_out and to_err until it has
// exited and its pipes are drained, and reaps it.
AttachedResult run_attached(const std::vector<std::string>& argv, const ChildUser* as, int to_out, int to_err);

}  // namespace gpudiag
