#include "util/private_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/deadline_child.h"
#include "util/duration.h"

namespace gpudiag {

DirVerdict judge_private_dir(mode_t mode, uid_t owner, uid_t uid, DirPrivacy privacy) noexcept {
  if (S_ISLNK(mode)) return DirVerdict::link;
  if (!S_ISDIR(mode)) return DirVerdict::not_dir;
  if (owner != uid) return DirVerdict::other_owner;
  const mode_t closed = privacy == DirPrivacy::no_other_access ? mode_t{077} : mode_t{S_IWGRP | S_IWOTH};
  return mode & closed ? DirVerdict::open_to_others : DirVerdict::ok;
}

bool is_plain_name(std::string_view name) noexcept {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// --- The steps: plain syscalls only. ---

int open_dir_fd(const char* path, DirLinks links) noexcept {
  if (links == DirLinks::anywhere) {
    struct open_how how;
    std::memset(&how, 0, sizeof how);
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS;
    const long fd = ::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
  }
  return ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

bool is_private_dir_fd(int dfd, uid_t uid, DirPrivacy privacy) noexcept {
  struct stat st;
  return ::fstat(dfd, &st) == 0 && judge_private_dir(st.st_mode, st.st_uid, uid, privacy) == DirVerdict::ok;
}

DirOpen open_private_dir(const char* path, uid_t uid, DirLinks links) noexcept {
  DirOpen d;
  d.fd = open_dir_fd(path, links);
  if (d.fd < 0) {
    d.err = errno;
    return d;
  }
  if (!is_private_dir_fd(d.fd, uid)) {
    ::close(d.fd);
    d.fd = -1;
    d.not_private = true;
  }
  return d;
}

namespace {

bool plain(const char* name) noexcept { return name && is_plain_name(std::string_view(name, std::strlen(name))); }

// Rule 2's names: one plain name relative to the dir's fd, never a path.
int open_plain(int dfd, const char* name, int flags, mode_t mode = 0) noexcept {
  if (!plain(name)) {
    errno = EINVAL;
    return -1;
  }
  return ::openat(dfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
}

// `fd` if fstat says it is of `type` (and `owner`'s, when given); else closed, EINVAL.
int only_if(int fd, mode_t type, const uid_t* owner = nullptr) noexcept {
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type && (!owner || st.st_uid == *owner)) return fd;
  ::close(fd);
  errno = EINVAL;
  return -1;
}

}  // namespace

int create_new_file(int dfd, const char* name) noexcept {
  return only_if(open_plain(dfd, name, O_WRONLY | O_CREAT | O_EXCL, kPrivateFileMode), S_IFREG);
}

NewFile create_first_free(int dfd, const std::vector<std::string>& names) noexcept {
  NewFile f;
  f.err = EINVAL;
  for (std::size_t i = 0; i < names.size(); ++i) {
    f.name = i;
    f.fd = create_new_file(dfd, names[i].c_str());
    if (f.fd >= 0) {
      f.err = 0;
      return f;
    }
    f.err = errno;
    if (f.err != EEXIST) return f;
  }
  return f;
}

NewWrite write_new_file(int dfd, const std::vector<std::string>& names, std::string_view data) noexcept {
  NewWrite w;
  const NewFile f = create_first_free(dfd, names);
  w.name = f.name;
  if (f.fd < 0) {
    w.step = NewWrite::create;
    w.err = f.err;
    return w;
  }
  const bool written = write_whole(f.fd, data.data(), data.size());
  w.err = written ? 0 : errno;
  const bool closed = ::close(f.fd) == 0;
  if (written && !closed) w.err = errno;
  w.step = written && closed ? NewWrite::done : NewWrite::write;
  return w;
}

Replace replace_file(int dfd, const char* name, const std::vector<std::string>& temps, std::string_view data,
                     mode_t mode) noexcept {
  Replace r;
  if (!plain(name)) {
    r.step = Replace::create_temp;
    r.err = EINVAL;
    return r;
  }
  struct stat st;
  if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    r.step = S_ISLNK(st.st_mode) ? Replace::target_is_link : Replace::target_not_regular;
    return r;
  }
  const NewFile f = create_first_free(dfd, temps);
  if (f.fd < 0) {
    r.step = Replace::create_temp;
    r.err = f.err;
    return r;
  }
  const char* tmp = temps[f.name].c_str();
  auto abandon = [&](Replace::Step step, bool close) {
    r.step = step;
    r.err = errno;
    if (close) ::close(f.fd);
    ::unlinkat(dfd, tmp, 0);
    return r;
  };
  // The umask must not decide who can read it (node_exporter runs as its own user).
  if (::fchmod(f.fd, mode) != 0) return abandon(Replace::chmod, true);
  if (!write_whole(f.fd, data.data(), data.size())) return abandon(Replace::write, true);
  if (::fsync(f.fd) != 0) return abandon(Replace::fsync, true);
  if (::close(f.fd) != 0) return abandon(Replace::close, false);
  if (::renameat(dfd, tmp, dfd, name) != 0) return abandon(Replace::rename, false);
  ::fsync(dfd);  // the rename itself durable; a failure here loses nothing already visible
  return r;
}

OpenedFile open_regular_file(int dfd, const char* name, const uid_t* owner) noexcept {
  OpenedFile f;
  const int fd = open_plain(dfd, name, O_RDONLY);
  if (fd < 0) {
    f.err = errno;
    f.why = f.err == ELOOP ? OpenedFile::link : OpenedFile::cannot_open;
    return f;
  }
  struct stat st;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (!regular || (owner && st.st_uid != *owner)) {
    f.why = regular ? OpenedFile::other_owner : OpenedFile::not_regular;
    ::close(fd);
    return f;
  }
  f.fd = fd;
  f.why = OpenedFile::ok;
  return f;
}

int open_own_file(int dfd, const char* name, bool create) noexcept {
  return only_if(open_plain(dfd, name, O_WRONLY | O_TRUNC | (create ? O_CREAT : 0), kPrivateFileMode), S_IFREG);
}

int open_owned_fifo(int dfd, const char* name, uid_t owner) noexcept {
  return only_if(open_plain(dfd, name, O_WRONLY), S_IFIFO, &owner);
}

long read_up_to(int fd, char* buf, std::size_t max) noexcept {
  std::size_t got = 0;
  while (got < max) {
    const ssize_t n = ::read(fd, buf + got, max - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return got ? static_cast<long>(got) : -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<long>(got);
}

// --- Prepared before the steps, and whole files by path. ---

std::vector<std::string> random_names(const std::string& stem, const std::string& suffix, int count) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    unsigned char raw[6] = {};
    if (::getentropy(raw, sizeof raw) != 0) {
      timespec ts;
      ::clock_gettime(CLOCK_REALTIME, &ts);
      const auto t = static_cast<unsigned long>(ts.tv_nsec) ^ (static_cast<unsigned long>(::getpid()) << 20) ^
                     static_cast<unsigned long>(i) << 40;
      for (std::size_t k = 0; k < sizeof raw; ++k) raw[k] = static_cast<unsigned char>(t >> (8 * k));
    }
    std::string name = stem;
    for (unsigned char c : raw) name += kChars[c % (sizeof kChars - 1)];
    out.push_back(name + suffix);
  }
  return out;
}

OwnedFile read_owned_file(int dir_fd, const char* name, uid_t owner, std::size_t max_bytes) {
  OwnedFile f;
  const OpenedFile o = open_regular_file(dir_fd, name, &owner);
  if (o.fd < 0) {
    f.why = o.why == OpenedFile::cannot_open || o.why == OpenedFile::link ? std::string(std::strerror(o.err))
                                                                         : "not a file of the job's owner";
    return f;
  }
  struct stat st;
  const std::size_t size = ::fstat(o.fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  f.bytes.assign(std::min(size, max_bytes), '\0');
  const long n = read_up_to(o.fd, f.bytes.data(), f.bytes.size());
  ::close(o.fd);
  f.bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  f.read = true;
  return f;
}

std::vector<std::string> dir_names(int dfd, bool (*keep)(std::string_view name), std::size_t max) {
  std::vector<std::string> names;
  const int own = ::openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0) return names;
  DIR* d = ::fdopendir(own);
  if (!d) {
    ::close(own);
    return names;
  }
  while (dirent* e = ::readdir(d)) {
    if (names.size() >= max) break;
    const std::string_view name = e->d_name;
    if (is_plain_name(name) && keep(name)) names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

namespace {

// Where a whole file's work stopped; the child sends this, the parent words it.
enum Step : int {
  kDone,
  kMkdir,
  kOpenDir,
  kDirNotPrivate,
  kReplace,  // `replace` says which step
  kOpenFile,
  kFileIsLink,
  kFileNotRegular,
  kRead,
  kTooBig,
};
struct Outcome {
  int step = kDone;
  int err = 0;
  Replace::Step replace = Replace::done;
};

// The child's side: the steps above, syscalls only.

Outcome open_place_dir(const FilePlace& p, bool make, int& dfd) {
  if (make && p.private_dir && ::mkdir(p.dir.c_str(), kPrivateDirMode) != 0 && errno != EEXIST) return {kMkdir, errno};
  dfd = open_dir_fd(p.dir.c_str(), DirLinks::anywhere);
  if (dfd < 0) return {kOpenDir, errno};
  if (p.private_dir && !is_private_dir_fd(dfd, ::geteuid())) {
    ::close(dfd);
    return {kDirNotPrivate, 0};
  }
  return {};
}

Outcome write_steps(const FilePlace& p, std::string_view data, mode_t mode, const std::vector<std::string>& temps) {
  int dfd = -1;
  if (Outcome o = open_place_dir(p, true, dfd); o.step != kDone) return o;
  const Replace r = replace_file(dfd, p.name.c_str(), temps, data, mode);
  ::close(dfd);
  if (r.step == Replace::done) return {};
  return {kReplace, r.err, r.step};
}

// Sends the file's bytes, then the Outcome.
Outcome read_steps(const FilePlace& p, std::size_t max_bytes, int out) {
  int dfd = -1;
  if (Outcome o = open_place_dir(p, false, dfd); o.step != kDone) return o;
  const OpenedFile f = open_regular_file(dfd, p.name.c_str());
  ::close(dfd);
  if (f.why == OpenedFile::link) return {kFileIsLink, f.err};
  if (f.why == OpenedFile::cannot_open) return {kOpenFile, f.err};
  if (f.fd < 0) return {kFileNotRegular, 0};
  char buf[65536];
  std::size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(f.fd);
      return {kRead, err};
    }
    if (n == 0) break;
    total += static_cast<std::size_t>(n);
    if (total > max_bytes) {
      ::close(f.fd);
      return {kTooBig, 0};
    }
    if (!write_whole(out, buf, static_cast<std::size_t>(n))) break;
  }
  ::close(f.fd);
  return {};
}

// The parent's side: words.

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
  if (o.step == kMkdir) return "cannot create the directory " + p.dir + ": " + std::strerror(o.err);
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

std::string replace_problem(const Outcome& o) {
  const std::string err = o.err ? std::strerror(o.err) : "";
  switch (o.replace) {
    case Replace::target_is_link: return "it is a symlink (give the real path)";
    case Replace::target_not_regular: return "it is not a regular file";
    case Replace::create_temp: return "cannot create a temporary file beside it: " + err;
    case Replace::chmod: return "chmod: " + err;
    case Replace::write: return "write: " + err;
    case Replace::fsync: return "fsync: " + err;
    case Replace::close: return "close: " + err;
    case Replace::rename: return "rename: " + err;
    case Replace::done: break;
  }
  return "step " + std::to_string(o.replace) + ": " + err;
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
  if (!is_plain_name(p.name)) return write_failure(p, "not a file name");
  // Everything the child needs is made here: it may not allocate.
  const auto temps = random_names("." + p.name + ".tmp." + std::to_string(::getpid()) + ".", "", 8);
  auto answer = run_in_child_until(timeout_s, sizeof(Outcome), [&](int out) {
    const Outcome o = write_steps(p, data, mode, temps);
    write_whole(out, &o, sizeof o);
  });
  if (!answer.finished)
    return write_failure(p, answer.error.rfind("no answer", 0) == 0 ? no_answer(timeout_s) : answer.error);
  Outcome o;
  if (answer.bytes.size() != sizeof o) return write_failure(p, "the writing process ended without an answer");
  std::memcpy(&o, answer.bytes.data(), sizeof o);
  switch (o.step) {
    case kDone: return true;
    case kMkdir:
    case kOpenDir:
    case kDirNotPrivate: return write_failure(p, dir_problem(p, o));
    case kReplace: return write_failure(p, replace_problem(o));
  }
  return write_failure(p, "step " + std::to_string(o.step) + ": " + (o.err ? std::strerror(o.err) : ""));
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
