#include "stacks/pyframes/process_memory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <string>

namespace gpudiag::pyframes {

ProcessMemory::~ProcessMemory() {
  if (fd_ >= 0) ::close(fd_);
}

bool ProcessMemory::read(std::uint64_t addr, void* out, std::size_t len) {
  if (len == 0) return true;
  if (!use_file_) {
    iovec local{out, len};
    iovec remote{reinterpret_cast<void*>(addr), len};
    ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(len)) return true;
    if (n >= 0) {
      error_ = EFAULT;  // part of the range is not mapped
      return false;
    }
    error_ = errno;
    // Not there (old kernel) or filtered (seccomp): the file gives the same bytes.
    if (error_ != ENOSYS && error_ != EPERM) return false;
    use_file_ = true;
  }
  return read_mem_file(addr, out, len);
}

bool ProcessMemory::read_mem_file(std::uint64_t addr, void* out, std::size_t len) {
  if (fd_ < 0) {
    fd_ = ::open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      error_ = errno == ENOENT ? ESRCH : errno;
      return false;
    }
  }
  if (addr > static_cast<std::uint64_t>(INT64_MAX)) {
    error_ = EFAULT;
    return false;
  }
  ssize_t n = ::pread(fd_, out, len, static_cast<off_t>(addr));
  if (n == static_cast<ssize_t>(len)) return true;
  // A process that is gone reads as 0 bytes; an unmapped address as EIO.
  error_ = n == 0 ? (::kill(pid_, 0) != 0 && errno == ESRCH ? ESRCH : EFAULT) : n < 0 && errno != EIO ? errno : EFAULT;
  return false;
}

}  // namespace gpudiag::pyframes
