#pragma once
// /proc/PID/maps, and which of its files holds the Python runtime: libpython3.N when the
// program links it, else the python executable itself (Debian's /usr/bin/python3.N is
// linked statically), else whatever the main program is (an embedding one).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::pyframes {

struct Mapping {
  std::uint64_t start = 0, end = 0, offset = 0;
  std::string perms;
  unsigned dev_major = 0, dev_minor = 0;
  std::uint64_t inode = 0;
  std::string path;  // empty for anonymous memory
};

// Lines that do not parse are skipped: the format is the kernel's, but a path may hold
// anything the file's owner chose, spaces included.
std::vector<Mapping> parse_maps(std::string_view text);

// The files worth looking at for _PyRuntime, best first: libpython3*, then python3*,
// then `exe` (the target's /proc/PID/exe) when it is mapped. Each file once.
std::vector<const Mapping*> python_image_candidates(const std::vector<Mapping>& maps, const std::string& exe);

// The address where file offset `file_offset` of the file (dev, inode) is mapped, or 0.
std::uint64_t address_of_file_offset(const std::vector<Mapping>& maps, const Mapping& file, std::uint64_t file_offset);

}  // namespace gpudiag::pyframes
