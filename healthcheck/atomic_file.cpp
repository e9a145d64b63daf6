#include "healthcheck/atomic_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "util/deadline_child.h"
#include "util/duration.h"

namespace gpudiag {
namespace {

// Where a file's work stopped; the child sends this, the parent words it.
enum Step : int {
  kDone,
  kMkdir,
  kOpenDir,
  kDirNotPrivate,
  kTargetIsLink,
  kTargetNotRegular,
  kCreateTemp,
  kChmod,
  kWrite,
  kFsync,
  kClose,
  kRename,
  kOpenFile,
  kFileIsLink,
  kFileNotRegular,
  kRead,
  kTooBig,
};
struct Outcome {
  int step = kDone;
  int err = 0;
};

// --- The child's side: syscalls only (util/deadline_child.h). ---

// Read, write and run-state rules all open the directory here.
int open_dir_without_links(const char* path) {
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  const long fd = ::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
  return ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

Outcome open_dir(const FilePlace& p, bool make, int& dfd) {
  if (make && p.private_dir && ::mkdir(p.dir.c_str(), 0700) != 0 && errno != EEXIST) return {kMkdir, errno};
  dfd = open_dir_without_links(p.dir.c_str());
  if (dfd < 0) return {kOpenDir, errno};
  struct stat st;
  if (p.private_dir && (::fstat(dfd, &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))) {
    ::close(dfd);
    return {kDirNotPrivate, 0};
  }
  return {};
}

Outcome write_steps(const FilePlace& p, std::string_view data, mode_t mode, const std::vector<std::string>& temps) {
  int dfd = -1;
  if (Outcome o = open_dir(p, true, dfd); o.step != kDone) return o;
  auto fail = [&](Outcome o) {
    ::close(dfd);
    return o;
  };
  struct stat st;
  if (::fstatat(dfd, p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return fail({S_ISLNK(st.st_mode) ? kTargetIsLink : kTargetNotRegular, 0});
  int fd = -1;
  const char* tmp = nullptr;
  for (const auto& t : temps) {
    tmp = t.c_str();
    fd = ::openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) return fail({kCreateTemp, errno});
  auto abandon = [&](int step) {
    const int err = errno;
    ::close(fd);
    ::unlinkat(dfd, tmp, 0);
    return fail({step, err});
  };
  // The umask must not decide who can read it (node_exporter runs as its own user).
  if (::fchmod(fd, mode) != 0) return abandon(kChmod);
  if (!write_whole(fd, data.data(), data.size())) return abandon(kWrite);
  if (::fsync(fd) != 0) return abandon(kFsync);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlinkat(dfd, tmp, 0);
    return fail({kClose, err});
  }
  if (::renameat(dfd, tmp, dfd, p.name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dfd, tmp, 0);
    return fail({kRename, err});
  }
  ::fsync(dfd);  // the rename itself durable; a failure here loses nothing already visible
  ::close(dfd);
  return {};
}

// Sends the file's bytes, then the Outcome.
Outcome read_steps(const FilePlace& p, std::size_t max_bytes, int out) {
  int dfd = -1;
  if (Outcome o = open_dir(p, false, dfd); o.step != kDone) return o;
  const int fd = ::openat(dfd, p.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  const int open_err = errno;
  ::close(dfd);
  if (fd < 0) return {open_err == ELOOP ? kFileIsLink : kOpenFile, open_err};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return {kFileNotRegular, 0};
  }
  char buf[65536];
  std::size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return {kRead, err};
    }
    if (n == 0) break;
    total += static_cast<std::size_t>(n);
    if (total > max_bytes) {
      ::close(fd);
      return {kTooBig, 0};
    }
    if (!write_whole(out, buf, static_cast<std::size_t>(n))) break;
  }
  ::close(fd);
  return {};
}

// --- The parent's side: words. ---

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

std::string no_answer(double timeout_s) {
  return "the filesystem gave no answer within " + seconds_text(timeout_s) +
         " (a hung NFS mount or a frozen filesystem?)";
}

std::string dir_problem(const FilePlace& p, const Outcome& o) {
  if (o.step == kMkdir)
    return "cannot create the directory " + p.dir + ": " + std::strerror(o.err);
  if (o.step == kDirNotPrivate)
    return p.dir + " belongs to another user or others can write to it: not used (make it 0700 and owned by the "
                   "user that runs gpudiag-health)";
  if (o.err == ELOOP)
    return p.dir + " is a symlink or has one on its path: not used (give the real path, as realpath prints it)";
  if (o.err == ENOTDIR) return p.dir + " is not a directory";
  return "its directory " + p.dir + ": " + std::strerror(o.err);
}

Result<bool> write_failure(const FilePlace& p, const std::string& what) {
  return Result<bool>::failure("gpudiag: cannot write " + p.shown + ": " + what);
}

}  // namespace

FilePlace place_of(const std::string& path) {
  const auto slash = path.rfind('/');
  FilePlace p;
  p.dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  p.name = slash == std::string::npos ? path : path.substr(slash + 1);
  p.shown = path;
  return p;
}

Result<bool> write_file_atomically(const FilePlace& p, std::string_view data, mode_t mode, double timeout_s) {
  if (p.name.empty() || p.name.find('/') != std::string::npos || p.name == "." || p.name == "..")
    return write_failure(p, "not a file name");
  // Everything the child needs is made here: it may not allocate.
  std::random_device rd;
  std::vector<std::string> temps;
  for (int i = 0; i < 8; ++i)
    temps.push_back("." + p.name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd() % 1000000));
  auto answer = run_in_child_until(timeout_s, sizeof(Outcome), [&](int out) {
    const Outcome o = write_steps(p, data, mode, temps);
    write_whole(out, &o, sizeof o);
  });
  if (!answer.finished)
    return write_failure(p, answer.error.rfind("no answer", 0) == 0 ? no_answer(timeout_s) : answer.error);
  Outcome o;
  if (answer.bytes.size() != sizeof o) return write_failure(p, "the writing process ended without an answer");
  std::memcpy(&o, answer.bytes.data(), sizeof o);
  const std::string err = o.err ? std::strerror(o.err) : "";
  switch (o.step) {
    case kDone: return true;
    case kMkdir:
    case kOpenDir:
    case kDirNotPrivate: return write_failure(p, dir_problem(p, o));
    case kTargetIsLink: return write_failure(p, "it is a symlink (give the real path)");
    case kTargetNotRegular: return write_failure(p, "it is not a regular file");
    case kCreateTemp: return write_failure(p, "cannot create a temporary file beside it: " + err);
    case kChmod: return write_failure(p, "chmod: " + err);
    case kWrite: return write_failure(p, "write: " + err);
    case kFsync: return write_failure(p, "fsync: " + err);
    case kClose: return write_failure(p, "close: " + err);
    case kRename: return write_failure(p, "rename: " + err);
  }
  return write_failure(p, "step " + std::to_string(o.step) + ": " + err);
}

FileRead read_file_bounded(const FilePlace& p, std::size_t max_bytes, double timeout_s) {
  FileRead r;
  auto answer = run_in_child_until(timeout_s, max_bytes + sizeof(Outcome), [&](int out) {
    const Outcome o = read_steps(p, max_bytes, out);
    write_whole(out, &o, sizeof o);
  });
  if (!answer.finished) {
    r.error = p.shown + ": " + (answer.error.rfind("no answer", 0) == 0 ? no_answer(timeout_s) : answer.error);
    return r;
  }
  Outcome o;
  if (answer.bytes.size() < sizeof o) {
    r.error = p.shown + ": the reading process ended without an answer";
    return r;
  }
  std::memcpy(&o, answer.bytes.data() + answer.bytes.size() - sizeof o, sizeof o);
  answer.bytes.resize(answer.bytes.size() - sizeof o);
  switch (o.step) {
    case kDone:
      r.kind = FileRead::read;
      r.bytes = std::move(answer.bytes);
      return r;
    case kOpenDir:
      if (o.err == ENOENT) {
        r.kind = FileRead::no_dir;
        return r;
      }
      [[fallthrough]];
    case kDirNotPrivate: r.error = dir_problem(p, o); return r;
    case kOpenFile:
      if (o.err == ENOENT) {
        r.kind = FileRead::no_file;
        return r;
      }
      r.error = p.shown + ": " + std::strerror(o.err);
      return r;
    case kFileIsLink: r.error = p.shown + ": a symlink"; return r;
    default:
      r.error = p.shown + ": not a regular file of at most " + size_text(max_bytes) + ", or unreadable";
      return r;
  }
}

}  // namespace gpudiag
