#pragma once
// Another process's memory, read without stopping it: process_vm_readv, and
// /proc/PID/mem where that system call is refused (seccomp in some containers). Both
// need ptrace read access to the target (same uid and Yama's kernel.yama.ptrace_scope
// <= 1 with a dumpable target, or CAP_SYS_PTRACE); neither stops it.
#include <sys/types.h>

#include "stacks/pyframes/memory_reader.h"

namespace gpudiag::pyframes {

class ProcessMemory : public MemoryReader {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;
  bool read(std::uint64_t addr, void* out, std::size_t len) override;

 private:
  bool read_mem_file(std::uint64_t addr, void* out, std::size_t len);
  pid_t pid_;
  bool use_file_ = false;
  int fd_ = -1;
};

}  // namespace gpudiag::pyframes
