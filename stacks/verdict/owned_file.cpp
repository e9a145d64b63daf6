#include "stacks/verdict/owned_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpudiag {

OwnedFile read_owned_file(int dir_fd, const char* name, uid_t owner, std::size_t max_bytes) {
  OwnedFile f;
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != owner) {
    f.why = fd < 0 ? std::string(std::strerror(errno)) : "not a file of the job's owner";
    if (fd >= 0) ::close(fd);
    return f;
  }
  f.bytes.assign(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max_bytes), '\0');
  std::size_t got = 0;
  while (got < f.bytes.size()) {
    const ssize_t n = ::read(fd, f.bytes.data() + got, f.bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  f.bytes.resize(got);
  f.read = true;
  return f;
}

}  // namespace gpudiag
