#include "util/visible_gpus.h"

namespace gpudiag {

std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices) {
  if (!cuda_visible_devices) return std::nullopt;
  if (*cuda_visible_devices == "NoDevFiles") return 0;
  int n = 0;
  bool in_entry = false;
  for (char c : *cuda_visible_devices) {
    if (c == ',') {
      in_entry = false;
    } else if (!in_entry) {
      in_entry = true;
      ++n;
    }
  }
  return n;
}

}  // namespace gpudiag
