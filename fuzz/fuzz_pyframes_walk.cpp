// The Python frame walker over garbage: the memory of a process that may be anything
// (exiting, another program, hostile), read through the same MemoryReader interface the
// real reader uses. Input: one mode byte, then the memory image, mapped at kBase where
// _PyRuntime is said to be. Mode bits 0-1: the version the ELF file stated (3.11.2, none:
// the debug offsets table decides, 3.12.0); bit 2: PyCode_Type at kBase + 0x100.
#include <cstring>

#include "fuzz/fuzz_input.h"
#include "stacks/pyframes/frame_walker.h"

namespace {

constexpr std::uint64_t kBase = 0x10000;

class FuzzMemory : public gpudiag::pyframes::MemoryReader {
 public:
  FuzzMemory(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool read(std::uint64_t addr, void* out, std::size_t len) override {
    if (addr < kBase || addr - kBase > size_ || len > size_ - (addr - kBase)) {
      error_ = EFAULT;
      return false;
    }
    std::memcpy(out, data_ + (addr - kBase), len);
    return true;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  FuzzMemory mem(data + 1, size - 1);
  gpudiag::pyframes::WalkInput in;
  in.runtime = kBase;
  const std::uint32_t versions[] = {0x030B02F0, 0, 0x030C00F0, 0x030B02F0};
  if ((mode & 3) != 1) in.file_version = versions[mode & 3];
  if (mode & 4) in.code_type = kBase + 0x100;
  gpudiag::pyframes::WalkLimits limits;
  auto r = gpudiag::pyframes::walk_python(mem, in, limits);
  const auto& s = r.stacks;
  GPUDIAG_FUZZ_CHECK(s.threads.size() <= limits.threads);
  GPUDIAG_FUZZ_CHECK(!s.threads.empty() || s.why_none.rfind("no Python frames: ", 0) == 0);
  GPUDIAG_FUZZ_CHECK(s.why_none.empty() || s.why_none.rfind("no Python frames: ", 0) == 0);
  for (const auto& t : s.threads) {
    GPUDIAG_FUZZ_CHECK(t.frames.size() <= limits.frames);
    for (const auto& f : t.frames) {
      GPUDIAG_FUZZ_CHECK(f.function.size() <= limits.string_chars * 4 + 3);
      GPUDIAG_FUZZ_CHECK(f.line >= 0);
    }
  }
  return 0;
}
