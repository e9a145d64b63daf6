#pragma once
// The one home for files gpudiag keeps from the other users of a node (issue 36.3):
// hang reports, hang.declared and torch's pipes in the diag dir, the watchdog's state
// dir, fabric.json, the checker's --output and run state, and the reports srun and the
// verdict read back. Another user on the node is assumed hostile: they can predict our
// names, create them first, plant a link or a FIFO there, or hand us a dir of theirs.
//
// The rules, each defined here once:
// 1. A private dir is a real directory (not a link) owned by the user that no one else
//    may write (`judge_private_dir`); the watchdog's state dir, which holds nothing
//    others may see either, also has no group or other access at all.
// 2. A dir is opened once, never through a link (`open_dir_fd`: its last component, or
//    no link anywhere on its path with openat2 RESOLVE_NO_SYMLINKS), and every name is
//    made or read relative to that fd: a dir renamed or replaced since it was checked
//    is never used by name (issue 21 A3). A name is one plain name, never a path.
// 3. A new file is only ever a new name: O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK, mode
//    0600, then fstat says a regular file (`create_new_file`). With O_EXCL neither a
//    planted link (which would aim the write elsewhere) nor a FIFO (which would block
//    the open) is ever opened.
// 4. A taken name gives the next of a list prepared with random parts
//    (`random_names`, `create_first_free`); nothing is ever written over.
// 5. Atomic replace (`replace_file`): a new temporary file beside the target (rule 3),
//    its mode set with fchmod (the umask must not decide who may read it), written,
//    fsync'd, closed, then renameat over the target; a link or anything but a regular
//    file at the target is refused. A reader sees the old content or the new, never half.
// 6. An existing file is opened O_NOFOLLOW|O_NONBLOCK and used only when fstat says a
//    regular file (of its owner, where the caller names one), read up to a bound
//    (`open_regular_file`, `read_owned_file`); a pipe to write is used only when it is
//    the owner's FIFO (`open_owned_fifo`).
//
// Two tiers. The steps (rules 1-6) make plain syscalls only, so they may run between
// fork and _exit in util/deadline_child.h's child: no allocation, no locks; every
// string (names, random parts) is prepared before. Whole-file work by path with a
// deadline (`write_file_atomically`, `read_file_bounded`) runs them in such a child,
// so a hung NFS mount or a frozen filesystem costs the deadline, not the caller.
// Tests: tests/unit/util/test_private_file.cpp; fuzz/fuzz_private_file.cpp.
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpudiag {

constexpr mode_t kPrivateFileMode = 0600;
constexpr mode_t kPrivateDirMode = 0700;

// --- Rule 1: pure. ---

enum class DirPrivacy {
  no_other_writers,  // others may read and enter it (the diag dir, --output's dir)
  no_other_access,   // others may do nothing with it (the watchdog's state dir)
};
enum class DirVerdict { ok, link, not_dir, other_owner, open_to_others };
// `mode` with its type bits, as lstat or fstat give it; `owner` its uid; `uid` the user.
DirVerdict judge_private_dir(mode_t mode, uid_t owner, uid_t uid,
                             DirPrivacy privacy = DirPrivacy::no_other_writers) noexcept;

// Rule 2's name: not empty, no '/', not "." or "..", no NUL.
bool is_plain_name(std::string_view name) noexcept;

// --- The steps: plain syscalls only (see above). Each returns -1 with errno set, or
// says why in its result. ---

enum class DirLinks {
  last,      // the dir itself is not a link (O_NOFOLLOW)
  anywhere,  // no link anywhere on its path (openat2 RESOLVE_NO_SYMLINKS; `last` before Linux 5.6)
};
// Rule 2: the dir, O_DIRECTORY, to work in by fd.
int open_dir_fd(const char* path, DirLinks links = DirLinks::last) noexcept;
// Rule 1 on an open dir: fstat, then judge_private_dir.
bool is_private_dir_fd(int dfd, uid_t uid, DirPrivacy privacy = DirPrivacy::no_other_writers) noexcept;

struct DirOpen {
  int fd = -1;
  int err = 0;               // fd < 0 && !not_private: errno of the open
  bool not_private = false;  // opened, but not the user's private dir (closed again)
};
// Rules 1 and 2 together: the dir the user keeps private files in.
DirOpen open_private_dir(const char* path, uid_t uid, DirLinks links = DirLinks::last) noexcept;

// Rule 3: a new regular file `name` in `dfd`, mode 0600, open for writing. EEXIST when
// the name is taken (by anything: a file, a link, a FIFO); EINVAL for a name that is
// not plain or a result that is not a regular file.
int create_new_file(int dfd, const char* name) noexcept;

// Rule 4: the first of `names` that is free; a taken name (EEXIST) moves on, any other
// error stops.
struct NewFile {
  int fd = -1;
  int err = 0;
  std::size_t name = 0;  // which of the names was made (or failed last)
};
NewFile create_first_free(int dfd, const std::vector<std::string>& names) noexcept;

// Rules 3 and 4 with the bytes: made, written whole, closed (NFS reports a failed
// write at the close).
struct NewWrite {
  enum Step { done, create, write } step = done;
  int err = 0;
  std::size_t name = 0;
};
NewWrite write_new_file(int dfd, const std::vector<std::string>& names, std::string_view data) noexcept;

// Rule 5: `data` replaces `name` in `dfd` with exactly `mode`; `temps` are the
// temporary names to try (random_names). A step that fails removes the temporary file.
struct Replace {
  enum Step { done, target_is_link, target_not_regular, create_temp, chmod, write, fsync, close, rename } step = done;
  int err = 0;
};
Replace replace_file(int dfd, const char* name, const std::vector<std::string>& temps, std::string_view data,
                     mode_t mode) noexcept;

// Rule 6: an existing regular file `name` in `dfd`, read-only; with `owner`, only
// that user's.
struct OpenedFile {
  enum Why { ok, cannot_open, link, not_regular, other_owner } why = cannot_open;
  int fd = -1;
  int err = 0;  // cannot_open: errno
};
OpenedFile open_regular_file(int dfd, const char* name, const uid_t* owner = nullptr) noexcept;
// An existing file of the user's own to write from its start (O_TRUNC), in a private
// dir; `create` makes it (0600) when missing. Never through a link, never blocking,
// only a regular file.
int open_own_file(int dfd, const char* name, bool create) noexcept;
// Rule 6 for pipes: `name` opened to write without blocking, used only when it is
// `owner`'s FIFO (torch makes its flight-recorder pipes as the user).
int open_owned_fifo(int dfd, const char* name, uid_t owner) noexcept;
// Reads until `max` bytes or the end; -1 on an error (errno).
long read_up_to(int fd, char* buf, std::size_t max) noexcept;

// --- Prepared before the steps, and whole files by path. ---

// Rule 2 for listing: the names in `dfd` that `keep` accepts (never "." or ".."), at
// most `max`, unsorted. Read through a fresh open of "." so that `dfd` stays open and
// keeps no position: several readers may list one dir fd in turn.
std::vector<std::string> dir_names(int dfd, bool (*keep)(std::string_view name), std::size_t max);

// `count` names stem + 6 random characters [a-z0-9] + suffix (getentropy; the clock
// where it fails: names must be hard to guess, not secret).
std::vector<std::string> random_names(const std::string& stem, const std::string& suffix, int count);

// Rule 6 with the bytes, for a reader that may allocate: at most max_bytes of a
// regular file of `owner`'s. `why` when not read: the open's error, or "not a file
// of the job's owner".
struct OwnedFile {
  bool read = false;
  std::string bytes;
  std::string why;
};
OwnedFile read_owned_file(int dir_fd, const char* name, uid_t owner, std::size_t max_bytes);

// How long one file's write or read may take by default (gpudiag-health --write-timeout).
constexpr double kFileTimeoutS = 10.0;

struct FilePlace {
  std::string dir;    // the directory (no link anywhere on its path)
  std::string name;   // a plain name in it
  std::string shown;  // the path for messages
  // The directory must be this user's and writable by no one else; a write makes it
  // (0700) when it is missing.
  bool private_dir = false;
};
// `path` split into its directory ("." when it has none) and name.
FilePlace place_of(const std::string& path);

// Rule 5 in a child with a deadline. Errors start "gpudiag: cannot write SHOWN: " and
// say what to do.
Result<bool> write_file_atomically(const FilePlace& place, std::string_view data, mode_t mode, double timeout_s);

struct FileRead {
  enum Kind { read, no_dir, no_file, failed } kind = failed;
  std::string bytes;  // when read
  std::string error;  // when failed: "SHOWN: why", or "DIR ...: why" for the directory
};
// Rule 6 in a child with a deadline: a regular file of at most max_bytes.
FileRead read_file_bounded(const FilePlace& place, std::size_t max_bytes, double timeout_s);

}  // namespace gpudiag
