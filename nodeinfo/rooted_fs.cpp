#include "nodeinfo/rooted_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace gpudiag {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

RootedFs::RootedFs(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) root_ = "/";
}

std::string RootedFs::host_path(std::string_view kernel_path) const {
  if (is_host_root()) return std::string(kernel_path);
  return root_ + std::string(kernel_path);
}

Result<std::string> RootedFs::read_impl(std::string_view kernel_path, std::size_t max_bytes,
                                        bool longer_is_error) const {
  const std::string where(kernel_path);
  const std::string path = host_path(kernel_path);
  FdCloser f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) {
    int err = errno;
    struct stat st;
    if (err == ENOENT && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return Result<std::string>::failure(where + ": dangling symlink");
    return Result<std::string>::failure(where + ": " + errno_text(err));
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return Result<std::string>::failure(where + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return Result<std::string>::failure(where + ": not a regular file");

  std::string data;
  // One byte more than allowed tells a file that is too long from one that fits.
  const std::size_t want = longer_is_error ? max_bytes + 1 : max_bytes;
  data.resize(want);
  std::size_t got = 0;
  while (got < want) {
    ssize_t n = ::read(f.fd, data.data() + got, want - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Result<std::string>::failure(where + ": " + errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (longer_is_error && got > max_bytes)
    return Result<std::string>::failure(where + ": file is larger than " + std::to_string(max_bytes) +
                                        " bytes");
  data.resize(got);
  return data;
}

Result<std::string> RootedFs::read_file(std::string_view kernel_path, std::size_t max_bytes) const {
  return read_impl(kernel_path, max_bytes, true);
}

Result<std::string> RootedFs::read_prefix(std::string_view kernel_path, std::size_t max_bytes) const {
  return read_impl(kernel_path, max_bytes, false);
}

Result<std::vector<std::string>> RootedFs::list_dir(std::string_view kernel_path) const {
  const std::string path = host_path(kernel_path);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
  if (!dir) return Result<std::vector<std::string>>::failure(std::string(kernel_path) + ": " + errno_text(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir.get())) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool RootedFs::exists(std::string_view kernel_path) const {
  struct stat st;
  return ::stat(host_path(kernel_path).c_str(), &st) == 0;
}

bool RootedFs::lexists(std::string_view kernel_path) const {
  struct stat st;
  return ::lstat(host_path(kernel_path).c_str(), &st) == 0;
}

Result<std::string> RootedFs::resolve(std::string_view kernel_path) const {
  const std::string where(kernel_path);
  char buf[PATH_MAX];
  if (!::realpath(host_path(kernel_path).c_str(), buf)) {
    int err = errno;
    struct stat st;
    if (err == ENOENT && ::lstat(host_path(kernel_path).c_str(), &st) == 0)
      return Result<std::string>::failure(where + ": dangling symlink");
    return Result<std::string>::failure(where + ": " + errno_text(err));
  }
  std::string real = buf;
  if (is_host_root()) return real;
  char rootbuf[PATH_MAX];
  if (!::realpath(root_.c_str(), rootbuf))
    return Result<std::string>::failure(root_ + ": " + errno_text(errno));
  std::string root = rootbuf;
  if (real == root) return std::string("/");
  if (real.compare(0, root.size(), root) != 0 || real[root.size()] != '/')
    return Result<std::string>::failure(where + ": symlink leads outside the fs-root");
  return real.substr(root.size());
}

}  // namespace gpudiag
