#pragma once
// The files gpudiag-health writes (--output, the run state) and reads back (the run
// state), in places an admin chose:
// - atomically: a reader (node_exporter's textfile collector, the next run) sees the
//   old content or the new, never half: a temporary file in the same directory
//   (O_EXCL, O_NOFOLLOW), fsync, rename;
// - never through a link: no symlink anywhere on the directory's path (openat2
//   RESOLVE_NO_SYMLINKS; kernels before 5.6 check its last component only), and a
//   symlink or anything but a regular file at the name is refused;
// - bounded in time: all of a file's work is done by a child process (util/deadline_child.h),
//   so a hung NFS mount or a frozen filesystem costs the deadline, not the run. A child
//   that the kernel holds is left behind and killed; what it had not done is not done.
#include <sys/types.h>

#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

// How long one file's write or read may take by default (--write-timeout).
constexpr double kFileTimeoutS = 10.0;

struct FilePlace {
  std::string dir;     // the directory
  std::string name;    // a plain name in it
  std::string shown;   // the path for messages
  // Run state: the directory must be this user's and writable by no one else; a write
  // makes it (0700) when it is missing.
  bool private_dir = false;
};
// `path` split into its directory ("." when it has none) and name.
FilePlace place_of(const std::string& path);

// Errors start "gpudiag: cannot write SHOWN: " and say what to do.
Result<bool> write_file_atomically(const FilePlace& place, std::string_view data, mode_t mode, double timeout_s);

struct FileRead {
  enum Kind { read, no_dir, no_file, failed } kind = failed;
  std::string bytes;  // when read
  std::string error;  // when failed: "SHOWN: why", or "DIR ...: why" for the directory
};
// A regular file of at most max_bytes, opened O_NOFOLLOW|O_NONBLOCK (a FIFO planted
// there cannot block it either).
FileRead read_file_bounded(const FilePlace& place, std::size_t max_bytes, double timeout_s);

}  // namespace gpudiag
