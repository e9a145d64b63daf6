#pragma once
// "a, b, c": lists in messages and reports.
#include <string>
#include <vector>

namespace gpudiag {

inline std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

}  // namespace gpudiag
