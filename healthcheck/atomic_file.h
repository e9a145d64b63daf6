#pragma once
// Writing a file so that a reader (node_exporter's textfile collector, the next
// health run) sees either the old content or the new, never half of it: a temporary
// file in the same directory, fsync, rename. The target itself is never followed:
// a symlink or anything but a regular file in its place is refused.
#include <sys/types.h>

#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

// In the directory open as `dir_fd`. Errors name `shown_path`.
Result<bool> write_file_atomically_at(int dir_fd, const std::string& name, std::string_view data, mode_t mode,
                                      const std::string& shown_path);
// `path`'s directory may be reached through symlinks (it is the admin's choice); the
// file itself may not be one.
Result<bool> write_file_atomically(const std::string& path, std::string_view data, mode_t mode);

}  // namespace gpudiag
