#include "healthcheck/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace gpudiag {
namespace {

Result<bool> fail(const std::string& path, const std::string& what) {
  return Result<bool>::failure("gpudiag: cannot write " + path + ": " + what);
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

Result<bool> write_file_atomically_at(int dir_fd, const std::string& name, std::string_view data, mode_t mode,
                                      const std::string& shown_path) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    return fail(shown_path, "not a file name");
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return fail(shown_path, S_ISLNK(st.st_mode) ? "it is a symlink (give the real path)" : "it is not a regular file");

  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd() % 1000000);
    fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return fail(shown_path, "cannot create a temporary file beside it: " + errno_text(errno));
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return fail(shown_path, what + ": " + errno_text(err));
  };
  // The umask must not decide who can read it (node_exporter runs as its own user).
  if (::fchmod(fd, mode) != 0) return abandon("chmod");
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return abandon("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return abandon("fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return fail(shown_path, "close: " + errno_text(err));
  }
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return fail(shown_path, "rename: " + errno_text(err));
  }
  ::fsync(dir_fd);  // the rename itself durable; a failure here loses nothing already visible
  return true;
}

Result<bool> write_file_atomically(const std::string& path, std::string_view data, mode_t mode) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return fail(path, "its directory " + dir + ": " + errno_text(errno));
  auto r = write_file_atomically_at(dir_fd, name, data, mode, path);
  ::close(dir_fd);
  return r;
}

}  // namespace gpudiag
