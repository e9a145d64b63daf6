#include "config/config_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace gpudiag {

Result<ConfigSource> ConfigSource::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Result<ConfigSource>::failure("gpudiag: cannot read config " + path + ": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Result<ConfigSource>::failure("gpudiag: cannot read config " + path + ": not a regular file");
  }
  return ConfigSource(fd, path, st);
}

ConfigSource::ConfigSource(ConfigSource&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)), st_(o.st_) {}

ConfigSource& ConfigSource::operator=(ConfigSource&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    st_ = o.st_;
  }
  return *this;
}

ConfigSource::~ConfigSource() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> ConfigSource::text() {
  std::string buf;
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      return Result<std::string>::failure("gpudiag: cannot read config " + path_ + ": " + std::strerror(err));
    }
    if (n == 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    if (buf.size() > kMaxConfigBytes) return Result<std::string>::failure("gpudiag: " + path_ + ": larger than 1 MiB, not a config");
  }
  return buf;
}

}  // namespace gpudiag
