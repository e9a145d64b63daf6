// The Python frame walker over garbage: the memory of a process that may be anything
// (exiting, another program, hostile), read through the same MemoryReader interface the
// real reader uses. Input: one mode byte (pyframes_walk_mode.h), then the memory image,
// mapped at kBase where _PyRuntime is said to be.
#include <cstring>

#include "fuzz/fuzz_input.h"
#include "fuzz/pyframes_walk_mode.h"
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
  const gpudiag::pyframes::WalkInput in = gpudiag::pyframes::walk_input_for_mode(mode, kBase);
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
