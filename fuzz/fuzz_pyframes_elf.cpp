// What the Python reader takes from files and /proc that the target's owner controls:
// the ELF image it maps (any bytes at a python3-like name) and /proc/PID/maps, whose
// paths the owner chose. Input: the ELF file; its text also goes to the maps parser.
#include <cstring>

#include "fuzz/fuzz_input.h"
#include "stacks/pyframes/elf_image.h"
#include "stacks/pyframes/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto read = [&](std::uint64_t off, void* out, std::size_t len) {
    if (off > size || len > size - off) return false;
    std::memcpy(out, data + off, len);
    return true;
  };
  auto r = gpudiag::pyframes::parse_elf(read, size);
  GPUDIAG_FUZZ_CHECK(r.facts.has_value() == r.error.empty());
  if (r.facts && r.facts->py_version) (void)gpudiag::pyframes::file_offset_of(*r.facts, *r.facts->py_version);
  auto maps = gpudiag::pyframes::parse_maps(gpudiag::fuzz::as_text(data, size));
  for (const auto& m : maps) GPUDIAG_FUZZ_CHECK(m.end > m.start && m.path.size() <= size);
  auto c = gpudiag::pyframes::python_image_candidates(maps, maps.empty() ? "" : maps.front().path);
  GPUDIAG_FUZZ_CHECK(c.size() <= maps.size());
  for (const auto* m : c) (void)gpudiag::pyframes::address_of_file_offset(maps, *m, m->offset);
  return 0;
}
