#pragma once
// The GPUs and RDMA NICs on PCI: the devices whose links and bridges up to the root
// port the acs and pcie checks look at, and whose presence makes the gdr check apply.
#include <string>
#include <vector>

#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_devices.h"

namespace gpudiag {

struct GpuOrNic {
  const PciDevice* pci = nullptr;  // points into the PciInventory it came from
  bool gpu = false;
  std::string hca;    // the RDMA device name for a NIC ("mlx5_0"), empty for a GPU
  std::string label;  // "GPU 0000:13:00.0", "NIC mlx5_0 (0000:15:00.0)"
};

// NVIDIA GPUs in PCI order, then the RDMA devices whose PCI device is known, in
// /sys/class/infiniband order.
std::vector<GpuOrNic> gpus_and_rdma_nics(const PciInventory& pci, const IbInventory& ib);

}  // namespace gpudiag
