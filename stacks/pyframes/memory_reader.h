#pragma once
// Where the walker's bytes come from: another process's memory in production, a
// fuzzer's input in fuzz/fuzz_pyframes_walk.cpp. The walker never sees an address it
// can dereference, only this.
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace gpudiag::pyframes {

class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  // All `len` bytes at `addr`, or false with `error()` set (an errno value: EFAULT for an
  // address not mapped, ESRCH for a process that is gone, EPERM/EACCES for a refusal).
  virtual bool read(std::uint64_t addr, void* out, std::size_t len) = 0;
  int error() const { return error_; }

 protected:
  int error_ = 0;
};

}  // namespace gpudiag::pyframes
