#include "nodeinfo/verbs_devices.h"

#include <infiniband/verbs.h>

namespace gpudiag {

std::optional<std::vector<std::string>> verbs_device_names() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return std::nullopt;
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

}  // namespace gpudiag
