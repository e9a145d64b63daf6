#pragma once
// Helpers shared by the fuzz targets: the raw bytes as text, and a way to split one
// input into several fields without the harness inventing a format of its own.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace gpudiag::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits on `sep`, keeping empty fields: the parsers must cope with those too.
inline std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t end = text.find(sep, start);
    if (end == std::string_view::npos) {
      out.push_back(text.substr(start));
      return out;
    }
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

// A property that does not hold is a bug even when nothing crashed: say which, abort
// so libFuzzer saves the input.
[[noreturn]] inline void property_failed(const char* what) {
  std::fprintf(stderr, "gpudiag fuzz: property violated: %s\n", what);
  std::abort();
}
#define GPUDIAG_FUZZ_CHECK(cond) \
  do {                           \
    if (!(cond)) ::gpudiag::fuzz::property_failed(#cond); \
  } while (0)

}  // namespace gpudiag::fuzz
