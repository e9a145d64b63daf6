#pragma once
// Python frames of every thread of a running CPython process, read from its memory
// (process_vm_readv, else /proc/PID/mem) without stopping it, without its cooperation
// and without a core dump: py-spy is not a Debian package, and a hung rank blocked in
// C (a gloo or NCCL wait) never reaches the interpreter, so nothing that runs inside
// the target can answer. ARCHITECTURE §5a says how the walk finds its way.
//
// Everything read from the target is untrusted: every read is bounded, every chain is
// capped and checked for cycles, and a process that exits mid-read, an unknown Python,
// a stripped binary or garbage memory yields no frames and a reason in `why_none`.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace gpudiag {

struct PyFrame {
  std::string function, file;  // function: the code object's qualname where the version has it
  int line;                    // 0: unknown
};

struct PyThread {
  long tid;        // the kernel's thread id (PyThreadState.native_thread_id); 0: unknown
  bool holds_gil;
  std::vector<PyFrame> frames;  // innermost first
  std::string note;             // non-empty when `frames` is incomplete: why (cut at the cap, unreadable memory)
};

struct PyStacks {
  std::vector<PyThread> threads;
  std::string python_version;  // "3.11.2"; empty when not found
  std::string method;          // "gpudiag (CPython 3.11 layout)", "gpudiag (CPython 3.13 debug offsets)" or "py-spy"
  std::string why_none;        // non-empty when no frames: "no Python frames: <reason>; <fix>"
};

// Reads `pid`'s Python stacks, giving up (with a reason) once `budget` is spent.
// Never throws.
PyStacks read_python_stacks(pid_t pid, std::chrono::milliseconds budget);

}  // namespace gpudiag
