#include "probe/gpu_join.h"

#include <cstdio>

namespace gpudiag::probe {

std::string normalise_bus_id(const std::string& id) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4) return "";
  char out[32];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
  return out;
}

std::vector<int> match_cuda_to_nvml(const std::vector<GpuSlot>& cuda, const std::vector<NvmlGpu>& nvml) {
  std::vector<int> out(cuda.size(), -1);
  std::vector<bool> taken(nvml.size(), false);
  for (std::size_t c = 0; c < cuda.size(); ++c) {
    const std::string bus = normalise_bus_id(cuda[c].pci_bus_id);
    for (std::size_t n = 0; n < nvml.size(); ++n) {
      if (taken[n]) continue;
      const bool same_uuid = !cuda[c].uuid.empty() && cuda[c].uuid == nvml[n].uuid;
      const bool same_bus = !bus.empty() && bus == normalise_bus_id(nvml[n].pci_bus_id);
      if (same_uuid || same_bus) {
        out[c] = static_cast<int>(n);
        taken[n] = true;
        break;
      }
    }
  }
  return out;
}

}  // namespace gpudiag::probe
