#pragma once
// The config file, opened once: the same open gives its identity (for the plugin's
// cache key, config_cache.h) and its text, so that what was checked is what is read.
#include <sys/stat.h>

#include <string>

#include "util/result.h"

namespace gpudiag {

// A config is a few KiB; anything over this is not one.
constexpr std::size_t kMaxConfigBytes = 1 << 20;

class ConfigSource {
 public:
  // O_NONBLOCK (a FIFO must not hang srun), a regular file only. Errors say which of
  // missing, unreadable (a root-only file read by srun as the user) or not a file it is:
  // "gpudiag: cannot read config PATH: why".
  static Result<ConfigSource> open(const std::string& path);
  ConfigSource(ConfigSource&& o) noexcept;
  ConfigSource& operator=(ConfigSource&& o) noexcept;
  ConfigSource(const ConfigSource&) = delete;
  ConfigSource& operator=(const ConfigSource&) = delete;
  ~ConfigSource();

  const std::string& path() const { return path_; }
  const struct stat& stat() const { return st_; }
  // The whole file, at most kMaxConfigBytes.
  Result<std::string> text();

 private:
  ConfigSource(int fd, std::string path, const struct stat& st) : fd_(fd), path_(std::move(path)), st_(st) {}
  int fd_ = -1;
  std::string path_;
  struct stat st_ {};
};

}  // namespace gpudiag
