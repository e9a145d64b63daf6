#pragma once
// What a hung task's processes are doing, as text: for every process of every task
// on this node its place in the tree, state, wchan and command line, then stacks:
// Python stacks from py-spy when it is on PATH, else from gpudiag's own reader
// (stacks/pyframes/, which reads the process's memory without stopping it), native
// stacks from eu-stack (or gdb),
// and otherwise what /proc offers (kernel stacks need root; wchan and syscall do not).
// Used by the hang watchdog and by `gpudiag stacks`.
//
// The hang watchdog kills the step after the report, so the report has one overall
// deadline: processes are looked at in parallel, each tool gets at most what is left of
// it, and a process nobody reached in time is listed as skipped. A process in D state
// (in vfork, or on a dead file server) makes ptrace-based tools wait for ever; even
// reading its /proc/PID/cmdline can block, so that too happens in the workers.
//
// Every byte of process text (command lines, names, what tools print) can come from
// another user's program: control bytes are escaped, so a report shown on a terminal
// cannot move the cursor, retitle the window or hide lines.
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "stacks/pyframes/python_stacks.h"
#include "util/control_bytes.h"  // escape_control, used by the report's callers too

namespace gpudiag {

struct TaskRoot {
  int rank = -1;   // -1: unknown
  pid_t pid = 0;   // the process the task started (the program, not the relay)
};

struct StackTools {
  std::string py_spy, eu_stack, gdb;  // full paths; empty when not found
};
StackTools find_stack_tools();  // on PATH

// One process's Python stacks as the report prints them: the method, then per thread
// its frames innermost first, or the reason there are none. Control bytes escaped.
std::string format_python_stacks(const PyStacks& s);

// `header` goes first. Every tool runs without a shell and with a deadline: at most
// `tool_timeout_s`, and never past `deadline_s` after the call (0: tool_timeout_s + 5).
std::string stack_report(const std::string& header, const std::vector<TaskRoot>& tasks, const StackTools& tools,
                         double tool_timeout_s = 15, double deadline_s = 0);

}  // namespace gpudiag
