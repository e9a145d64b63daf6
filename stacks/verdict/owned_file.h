#pragma once
// One file of a step's diag dir, read as untrusted (the hang reports, torch's flight-
// recorder dumps): opened relative to the dir without following a link or blocking on a
// FIFO, used only when it is a regular file of the job's owner, and read up to a bound.
// The merge and the flight recorder read the same dir under the same rule.
#include <sys/types.h>

#include <cstddef>
#include <string>

namespace gpudiag {

struct OwnedFile {
  bool read = false;
  std::string bytes;  // at most max_bytes
  std::string why;    // !read: the error, or "not a file of the job's owner"
};

OwnedFile read_owned_file(int dir_fd, const char* name, uid_t owner, std::size_t max_bytes);

}  // namespace gpudiag
