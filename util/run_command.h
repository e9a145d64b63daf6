#pragma once
// Runs a program with a hard deadline: started by spawn_child (no shell, its own session
// and so its own process group, which dies with it; nothing of ours but the pipes), and
// bounded captured output.
// Used for scontrol, which can hang when slurmctld is unreachable, and for GPU helpers.
#include <string>
#include <vector>

namespace gpudiag {

struct CommandResult {
  bool started = false;     // false: exec failed (error says why)
  bool timed_out = false;   // killed at the deadline
  int exit_code = -1;       // when it exited normally
  int signal = 0;           // when a signal ended it
  std::string out, err;     // at most max_output bytes each
  std::string error;        // why it did not start
  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
};

// argv[0] is looked up in PATH. The child gets our environment.
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          std::size_t max_output = 1 << 20);
// One line for messages: "scontrol exited 1: <stderr>", "scontrol timed out after 10 s".
std::string describe_failure(const std::string& name, const CommandResult& r, double timeout_s);

}  // namespace gpudiag
