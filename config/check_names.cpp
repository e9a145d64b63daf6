#include "config/check_names.h"

#include "util/text_lists.h"

namespace gpudiag {

const std::vector<std::string>& known_checks() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& c : kCheckNames) out.emplace_back(c.name);
    return out;
  }();
  return names;
}

const std::vector<std::string>& quick_checks() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& c : kCheckNames)
      if (c.quick) out.emplace_back(c.name);
    return out;
  }();
  return names;
}

const std::string& known_checks_text() {
  static const std::string text = join(known_checks(), ",");
  return text;
}

}  // namespace gpudiag
