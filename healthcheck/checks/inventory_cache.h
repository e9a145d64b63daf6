#pragma once
// The PCI devices and RDMA devices of a node, read once per run and shared by the checks
// that walk them (ib, ibcounters, acs, gpu, pcie, gdr): each walk is some hundred sysfs reads.
#include <optional>

#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_devices.h"

namespace gpudiag {

struct CheckContext;

struct InventoryCache {
  std::optional<PciInventory> pci;
  std::optional<IbInventory> ib;
};

// Read through ctx.fs on first use; later calls in the same run return the same facts.
const PciInventory& pci_inventory(const CheckContext& ctx);
const IbInventory& ib_inventory(const CheckContext& ctx);

}  // namespace gpudiag
