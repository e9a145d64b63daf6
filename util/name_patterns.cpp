#include "util/name_patterns.h"

#include <fnmatch.h>

namespace gpudiag {

bool has_glob(std::string_view pattern) { return pattern.find_first_of("*?[") != std::string_view::npos; }

bool matches(std::string_view pattern, const std::string& name) {
  return ::fnmatch(std::string(pattern).c_str(), name.c_str(), 0) == 0;
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& name) {
  for (const auto& p : patterns)
    if (matches(p, name)) return true;
  return false;
}

}  // namespace gpudiag
