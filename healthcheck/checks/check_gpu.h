#pragma once
// The gpu check (PCI part): NVIDIA GPUs on the PCI bus, counted without a driver, so a
// GPU that fell off the bus is caught even when the driver is wedged. With topology,
// also where each GPU and NIC sits (NUMA node, shared PCIe switch).
#include "healthcheck/checks/check_context.h"
#include "healthcheck/checks/pci_locality.h"
#include "healthcheck/report/report.h"
#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_devices.h"

namespace gpudiag {

// Pure: GPU count and unreadable devices.
CheckResult evaluate_gpu(const PciInventory& pci, const GpuExpect& expect);
// Pure: adds locality findings and details (one per GPU and NIC) to `out`.
void add_locality(CheckResult& out, const PciInventory& pci, const IbInventory& ib, const PciLocality& loc);
CheckResult run_gpu_check(const CheckContext& ctx);

}  // namespace gpudiag
