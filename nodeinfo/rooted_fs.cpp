#include "nodeinfo/rooted_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

namespace gpudiag {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd = o.fd;
      o.fd = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Kernels before 5.6 (and some sandboxes) lack openat2: remember the first refusal.
std::atomic<bool> g_openat2_missing{false};

constexpr int kMaxLinks = 40;  // the kernel's own limit (ELOOP)

void push_components(std::deque<std::string>& out, std::string_view path, bool front) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    std::size_t slash = path.find('/', pos);
    std::string_view part = path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  if (front) out.insert(out.begin(), parts.begin(), parts.end());
  else out.insert(out.end(), parts.begin(), parts.end());
}

// A path walked one component at a time under a root, as RESOLVE_IN_ROOT does it: ".."
// stops at the root and a symlink's target, absolute or not, is read inside the root.
struct Walk {
  std::vector<Fd> dirs;            // dirs[0] is the root; back() holds `last`
  std::vector<std::string> names;  // the kernel path of dirs[1..]
  std::string last;                // "" when the path names dirs.back() itself
  int err = 0;

  std::string kernel_path() const {
    std::string p;
    for (const auto& n : names) p += "/" + n;
    if (!last.empty()) p += "/" + last;
    return p.empty() ? "/" : p;
  }
};

Walk walk_in_root(int root_fd, std::string_view path, bool follow_last) {
  Walk w;
  w.dirs.emplace_back(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (w.dirs[0].fd < 0) {
    w.err = errno;
    return w;
  }
  std::deque<std::string> pending;
  push_components(pending, path, false);
  int links = 0;
  while (!pending.empty()) {
    std::string comp = std::move(pending.front());
    pending.pop_front();
    if (comp == "..") {
      if (w.dirs.size() > 1) {
        w.dirs.pop_back();
        w.names.pop_back();
      }
      continue;
    }
    const bool is_last = pending.empty();
    struct stat st;
    if (::fstatat(w.dirs.back().fd, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      w.err = errno;
      if (is_last) w.last = comp;
      return w;
    }
    if (S_ISLNK(st.st_mode) && (!is_last || follow_last)) {
      if (++links > kMaxLinks) {
        w.err = ELOOP;
        return w;
      }
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(w.dirs.back().fd, comp.c_str(), buf, sizeof buf);
      if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf) {
        w.err = n < 0 ? errno : ENAMETOOLONG;
        return w;
      }
      std::string_view target(buf, static_cast<std::size_t>(n));
      if (!target.empty() && target[0] == '/') {
        w.dirs.resize(1);
        w.names.clear();
      }
      push_components(pending, target, true);
      continue;
    }
    if (is_last) {
      w.last = comp;
      return w;
    }
    if (!S_ISDIR(st.st_mode)) {
      w.err = ENOTDIR;
      return w;
    }
    Fd next(::openat(w.dirs.back().fd, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.fd < 0) {
      w.err = errno;
      return w;
    }
    w.dirs.push_back(std::move(next));
    w.names.push_back(std::move(comp));
  }
  return w;
}

}  // namespace

struct RootedFs::RootDir {
  int fd = -1;
  int err = 0;
  std::string real;  // the root's own path with its symlinks resolved
  ~RootDir() {
    if (fd >= 0) ::close(fd);
  }
};

RootedFs::RootedFs(std::string root, Resolver resolver) : root_(std::move(root)), resolver_(resolver) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) root_ = "/";
  if (!is_host_root()) {
    auto dir = std::make_shared<RootDir>();
    dir->fd = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir->fd < 0) dir->err = errno;
    char buf[PATH_MAX];
    if (::realpath(root_.c_str(), buf)) dir->real = buf;
    root_dir_ = std::move(dir);
  }
}

std::string RootedFs::host_path(std::string_view kernel_path) const {
  if (is_host_root()) return std::string(kernel_path);
  return root_ + std::string(kernel_path);
}

// An fd for kernel_path opened with `flags`, every step of the path inside the root;
// -errno on failure.
int RootedFs::open_in_root(std::string_view kernel_path, int flags) const {
  flags |= O_CLOEXEC;
  if (is_host_root()) {
    int fd = ::open(std::string(kernel_path).c_str(), flags);
    return fd < 0 ? -errno : fd;
  }
  if (root_dir_->fd < 0) return -root_dir_->err;
  const std::string path(kernel_path);
  if (resolver_ == Resolver::automatic && !g_openat2_missing.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = -1;
    // EAGAIN: a rename raced with a ".." step; the kernel asks for a retry.
    for (int tries = 0; tries < 3; ++tries) {
      fd = ::syscall(SYS_openat2, root_dir_->fd, path.c_str(), &how, sizeof how);
      if (fd >= 0 || errno != EAGAIN) break;
    }
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS && errno != EPERM) return -errno;
    g_openat2_missing.store(true, std::memory_order_relaxed);
  }
  Walk w = walk_in_root(root_dir_->fd, path, (flags & O_NOFOLLOW) == 0);
  if (w.err) return -w.err;
  int fd = ::openat(w.dirs.back().fd, w.last.empty() ? "." : w.last.c_str(), flags | O_NOFOLLOW);
  return fd < 0 ? -errno : fd;
}

bool RootedFs::is_dangling(std::string_view kernel_path) const {
  Fd link(open_in_root(kernel_path, O_PATH | O_NOFOLLOW));
  if (link.fd < 0) return false;
  struct stat st;
  return ::fstat(link.fd, &st) == 0 && S_ISLNK(st.st_mode);
}

Result<std::string> RootedFs::read_impl(std::string_view kernel_path, std::size_t max_bytes,
                                        bool longer_is_error) const {
  const std::string where(kernel_path);
  auto failed = [&](int err) {
    if (err == ENOENT && is_dangling(kernel_path)) return Result<std::string>::failure(where + ": dangling symlink");
    return Result<std::string>::failure(where + ": " + errno_text(err));
  };
  // Look before opening: opening a device node can itself have effects, and a FIFO
  // would block. O_PATH opens nothing.
  Fd probe(open_in_root(kernel_path, O_PATH));
  if (probe.fd < 0) return failed(-probe.fd);
  struct stat before;
  if (::fstat(probe.fd, &before) != 0) return failed(errno);
  if (!S_ISREG(before.st_mode)) return Result<std::string>::failure(where + ": not a regular file");
  Fd f(open_in_root(kernel_path, O_RDONLY | O_NONBLOCK | O_NOCTTY));
  if (f.fd < 0) return failed(-f.fd);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return failed(errno);
  // Swapped between the look and the open: refuse rather than read something else.
  if (!S_ISREG(st.st_mode) || st.st_ino != before.st_ino || st.st_dev != before.st_dev)
    return Result<std::string>::failure(where + ": not a regular file");

  std::string data;
  // One byte more than allowed tells a file that is too long from one that fits.
  const std::size_t want = longer_is_error ? max_bytes + 1 : max_bytes;
  // The buffer grows as the file does: a large limit (a kernel log) must not cost
  // touching that much memory for a small file. procfs reports size 0, so st_size
  // cannot say how much to expect.
  data.resize(std::min<std::size_t>(want, 64 * 1024));
  std::size_t got = 0;
  while (got < want) {
    if (got == data.size()) data.resize(std::min(want, data.size() * 2));
    ssize_t n = ::read(f.fd, data.data() + got, data.size() - got);
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
  int fd = open_in_root(kernel_path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Result<std::vector<std::string>>::failure(std::string(kernel_path) + ": " + errno_text(-fd));
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(fd), ::closedir);
  if (!dir) {
    int err = errno;
    ::close(fd);
    return Result<std::vector<std::string>>::failure(std::string(kernel_path) + ": " + errno_text(err));
  }
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
  Fd f(open_in_root(kernel_path, O_PATH));
  return f.fd >= 0;
}

bool RootedFs::lexists(std::string_view kernel_path) const {
  Fd f(open_in_root(kernel_path, O_PATH | O_NOFOLLOW));
  return f.fd >= 0;
}

Result<std::string> RootedFs::resolve(std::string_view kernel_path) const {
  const std::string where(kernel_path);
  if (is_host_root()) {
    char buf[PATH_MAX];
    if (!::realpath(where.c_str(), buf)) {
      int err = errno;
      struct stat st;
      if (err == ENOENT && ::lstat(where.c_str(), &st) == 0)
        return Result<std::string>::failure(where + ": dangling symlink");
      return Result<std::string>::failure(where + ": " + errno_text(err));
    }
    return std::string(buf);
  }
  if (root_dir_->fd < 0) return Result<std::string>::failure(root_ + ": " + errno_text(root_dir_->err));
  // Symlink targets are read inside the root, as the kernel would read them on the
  // machine the tree came from: /sys/bus/pci/devices/X -> ../../../devices/... stays in.
  // The fd's own name in /proc is the answer, once the open stayed inside the root
  // (it did: that is what open_in_root guarantees); the walk is for a missing /proc.
  if (resolver_ == Resolver::automatic && !root_dir_->real.empty()) {
    Fd f(open_in_root(kernel_path, O_PATH));
    if (f.fd < 0) {
      if (-f.fd == ENOENT && is_dangling(kernel_path)) return Result<std::string>::failure(where + ": dangling symlink");
      return Result<std::string>::failure(where + ": " + errno_text(-f.fd));
    }
    char buf[PATH_MAX];
    const std::string link = "/proc/self/fd/" + std::to_string(f.fd);
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    const std::string& root = root_dir_->real;
    if (n > 0 && static_cast<std::size_t>(n) < sizeof buf) {
      std::string_view host(buf, static_cast<std::size_t>(n));
      if (host == root) return std::string("/");
      if (root == "/") return std::string(host);
      if (host.substr(0, root.size()) == root && host.size() > root.size() && host[root.size()] == '/')
        return std::string(host.substr(root.size()));
    }
  }
  Walk w = walk_in_root(root_dir_->fd, where, true);
  if (w.err) {
    if (w.err == ENOENT && is_dangling(kernel_path)) return Result<std::string>::failure(where + ": dangling symlink");
    return Result<std::string>::failure(where + ": " + errno_text(w.err));
  }
  return w.kernel_path();
}

}  // namespace gpudiag
