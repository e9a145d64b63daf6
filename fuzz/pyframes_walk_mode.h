#pragma once
// What the first byte of a pyframes_walk input selects, for the fuzzer
// (fuzz_pyframes_walk.cpp), its seeds (make_pyframes_seeds.py) and the unit test that
// walks them: bits 0-1 the version the ELF file states (3.11.2; none, so the debug offsets
// table decides; 3.12.3; 3.11.9), bit 2 that PyCode_Type is at `base` + 0x100. The memory
// image follows, mapped at `base`, where _PyRuntime is.
#include <cstdint>

#include "stacks/pyframes/frame_walker.h"

namespace gpudiag::pyframes {

inline WalkInput walk_input_for_mode(std::uint8_t mode, std::uint64_t base) {
  constexpr std::uint32_t kVersions[] = {0x030B02F0, 0, 0x030C03F0, 0x030B09F0};
  WalkInput in;
  in.runtime = base;
  if ((mode & 3) != 1) in.file_version = kVersions[mode & 3];
  if (mode & 4) in.code_type = base + 0x100;
  return in;
}

}  // namespace gpudiag::pyframes
