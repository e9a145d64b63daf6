#include "healthcheck/run_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "healthcheck/atomic_file.h"

namespace gpudiag {
namespace {

constexpr int kVersion = 1;
constexpr std::size_t kMaxStateBytes = 1 << 20;
const char* const kStatefulChecks[] = {"xid", "ibcounters"};

// A node name becomes a file name: nothing that could leave the directory.
std::string file_name_for(const std::string& node) {
  std::string out;
  for (char c : node) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_' || c == '.';
    out += safe ? c : '_';
  }
  if (out.empty() || out[0] == '.') out = "node" + out;
  return out + ".json";
}

// The directory itself, never through a symlink, and ours alone.
Result<int> open_state_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR)
      return Result<int>::failure(dir + " is a symlink or not a directory: not used (give a real directory)");
    return Result<int>::failure(dir + ": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    ::close(fd);
    return Result<int>::failure(dir + " belongs to another user or others can write to it: not used (make it " +
                                "0700 and owned by the user that runs gpudiag-health)");
  }
  return fd;
}

Result<nlohmann::json> read_state_file(int dir_fd, const std::string& name, const std::string& path) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return nlohmann::json::object();  // a first run
    return Result<nlohmann::json>::failure(path + ": " + (err == ELOOP ? "a symlink" : std::strerror(err)));
  }
  struct stat st;
  std::string text;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) <= kMaxStateBytes;
  if (ok) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ok = false;
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > kMaxStateBytes) {
        ok = false;
        break;
      }
    }
  }
  ::close(fd);
  if (!ok) return Result<nlohmann::json>::failure(path + ": not a regular file of at most 1 MiB, or unreadable");
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("version", 0) != kVersion || !doc.contains("checks") ||
      !doc["checks"].is_object())
    return Result<nlohmann::json>::failure(path + ": not a gpudiag run state file");
  return doc["checks"];
}

}  // namespace

bool uses_run_state(const std::vector<std::string>& checks) {
  return std::any_of(checks.begin(), checks.end(), [](const std::string& c) {
    return std::any_of(std::begin(kStatefulChecks), std::end(kStatefulChecks), [&](const char* s) { return c == s; });
  });
}

RunState::RunState(RunState&& o) noexcept
    : enabled_(o.enabled_),
      dir_(std::move(o.dir_)),
      file_name_(std::move(o.file_name_)),
      path_(std::move(o.path_)),
      note_(std::move(o.note_)),
      node_(std::move(o.node_)),
      previous_(std::move(o.previous_)),
      updates_(std::move(o.updates_)) {}

RunState RunState::disabled(std::string why) {
  RunState s;
  s.note_ = std::move(why);
  return s;
}

RunState RunState::load(const std::string& dir, const std::string& node) {
  RunState s;
  s.enabled_ = true;
  s.dir_ = dir;
  s.node_ = node;
  s.file_name_ = file_name_for(node);
  s.path_ = dir + "/" + s.file_name_;
  auto fd = open_state_dir(dir);
  if (!fd) {
    if (::access(dir.c_str(), F_OK) != 0 && errno == ENOENT) return s;  // created on save: a first run
    s.note_ = "run state " + fd.error();
    return s;
  }
  auto checks = read_state_file(*fd, s.file_name_, s.path_);
  ::close(*fd);
  if (checks) s.previous_ = *checks;
  else s.note_ = "run state " + checks.error() + ": treated as no previous run";
  return s;
}

nlohmann::json RunState::previous(const std::string& check) const {
  std::lock_guard lock(mu_);
  auto it = previous_.find(check);
  return it == previous_.end() ? nlohmann::json() : *it;
}

void RunState::set(const std::string& check, nlohmann::json value) {
  std::lock_guard lock(mu_);
  updates_[check] = std::move(value);
}

Result<bool> RunState::save() const {
  std::lock_guard lock(mu_);
  if (!enabled_ || updates_.empty()) return false;
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Result<bool>::failure("gpudiag: cannot create the run state directory " + dir_ + ": " +
                                 std::strerror(errno) + " (create it, or point --state-dir or health.state_dir "
                                 "at a directory this user may write)");
  auto fd = open_state_dir(dir_);
  if (!fd) return Result<bool>::failure("gpudiag: cannot keep run state: " + fd.error());
  nlohmann::json checks = previous_;
  for (auto it = updates_.begin(); it != updates_.end(); ++it) checks[it.key()] = it.value();
  nlohmann::json doc = {{"version", kVersion}, {"node", node_}, {"checks", checks}};
  // A node name that is not UTF-8 must not lose the state (nlohmann throws by default).
  const std::string text = doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  auto written = write_file_atomically_at(*fd, file_name_, text, 0600, path_);
  ::close(*fd);
  return written;
}

}  // namespace gpudiag
