#pragma once
// What a hung task's processes are doing, as text: for every process of every task
// on this node its place in the tree, state, wchan and command line, then stacks:
// Python stacks from py-spy when it is on PATH, native stacks from eu-stack (or gdb),
// and otherwise what /proc offers (kernel stacks need root; wchan and syscall do not).
// Used by the hang watchdog and by `gpudiag stacks`.
#include <sys/types.h>

#include <string>
#include <vector>

namespace gpudiag {

struct TaskRoot {
  int rank = -1;   // -1: unknown
  pid_t pid = 0;   // the process the task started (the program, not the relay)
};

struct StackTools {
  std::string py_spy, eu_stack, gdb;  // full paths; empty when not found
};
StackTools find_stack_tools();  // on PATH

// `header` goes first. Every tool runs without a shell and with a deadline.
std::string stack_report(const std::string& header, const std::vector<TaskRoot>& tasks, const StackTools& tools,
                         double tool_timeout_s = 15);

}  // namespace gpudiag
