#pragma once
// The walk itself: from _PyRuntime's address in the target, through the interpreters,
// their thread states and each thread's frame chain, to function, file and line. Pure
// apart from the MemoryReader, so a fuzzer can feed it garbage
// (fuzz/fuzz_pyframes_walk.cpp). Every chain is capped and checked for cycles, every
// length is bounded, and the deadline is checked before each read.
#include <chrono>
#include <cstdint>
#include <optional>

#include "stacks/pyframes/memory_reader.h"
#include "stacks/pyframes/python_stacks.h"

namespace gpudiag::pyframes {

struct WalkLimits {
  std::size_t interpreters = 64;
  std::size_t threads = 512;      // over all interpreters
  std::size_t frames = 256;       // per thread, the interpreter's own shim frames included
  std::size_t string_chars = 1024;
  std::size_t linetable_bytes = 256 * 1024;
  std::size_t codes = 4096;       // distinct code objects read per walk
};

struct WalkInput {
  std::uint64_t runtime = 0;                // where _PyRuntime is in the target
  std::optional<std::uint32_t> file_version;  // Py_Version, as read from the ELF file
  std::optional<std::uint64_t> code_type;     // &PyCode_Type in the target, when known
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// Threads, version and method, or `why_none` ("no Python frames: ...") and, in
// `read_errno`, the errno of the read that failed (EPERM, ESRCH, ...; 0 for other reasons).
struct WalkResult {
  PyStacks stacks;
  int read_errno = 0;
};
WalkResult walk_python(MemoryReader& mem, const WalkInput& in, const WalkLimits& limits = {});

}  // namespace gpudiag::pyframes
