#include "nodeinfo/gpus_and_nics.h"

namespace gpudiag {

std::vector<GpuOrNic> gpus_and_rdma_nics(const PciInventory& pci, const IbInventory& ib) {
  std::vector<GpuOrNic> out;
  for (const auto& dev : pci.devices)
    if (dev.is_nvidia_gpu()) out.push_back({&dev, true, "", "GPU " + dev.bdf});
  for (const auto& hca : ib.hcas) {
    const PciDevice* dev = hca.pci_bdf.empty() ? nullptr : pci.find(hca.pci_bdf);
    if (dev) out.push_back({dev, false, hca.name, "NIC " + hca.name + " (" + dev->bdf + ")"});
  }
  return out;
}

}  // namespace gpudiag
