#include "util/visible_gpus.h"

#include <algorithm>
#include <vector>

namespace gpudiag {
namespace {

bool names_a_device(std::string_view e) {
  if (e.empty()) return false;
  if (std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  return e.size() > 4 && (e.substr(0, 4) == "GPU-" || e.substr(0, 4) == "MIG-");
}

}  // namespace

std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices) {
  if (!cuda_visible_devices) return std::nullopt;
  std::string_view rest = *cuda_visible_devices;
  std::vector<std::string_view> seen;
  for (;;) {
    const auto comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    if (!names_a_device(entry)) break;
    if (std::find(seen.begin(), seen.end(), entry) != seen.end()) return 0;  // CUDA refuses the list
    seen.push_back(entry);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return static_cast<int>(seen.size());
}

}  // namespace gpudiag
