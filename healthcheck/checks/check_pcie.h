#pragma once
// The pcie check: the PCIe link of every GPU and RDMA NIC, and of the bridges between
// them and the root port, against what the link can do. A GPU that trained at x8 or
// at a lower generation after a bad reseat, a cracked riser or a failing retimer runs
// every host<->device and GPUDirect transfer at half speed or worse, and nothing else
// in the stack complains.
#include <string>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"
#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_devices.h"
#include "nodeinfo/pcie_links.h"

namespace gpudiag {

struct PcieDevice {
  enum class Kind { gpu, nic, bridge };
  Kind kind = Kind::gpu;
  std::string bdf;
  std::string label;  // "GPU 0000:13:00.0", "NIC mlx5_0 (0000:15:00.0)", "bridge 0000:12:00.0"
  std::string hca;    // a NIC's RDMA device name
  std::string model;  // "10de:2335" (vendor:device); empty when unreadable
  PcieLink link;
  // Bridges: the GPUs and NICs below it, and its neighbours on the paths to them (the
  // device or bridge just below, the bridge just above), whose capability bounds what
  // this bridge's link can train to. GPUs and NICs: `above` is the port above them.
  std::vector<std::string> feeds;
  std::vector<std::string> below, above;
};

struct PcieFacts {
  std::string error;                // /sys/bus/pci/devices could not be listed
  std::vector<PcieDevice> devices;  // GPUs, then NICs, then bridges nearest-first
};

// The links of the GPUs and NICs in `pci`/`ib` and of the bridges above them.
PcieFacts read_pcie_facts(const RootedFs& fs, const PciInventory& pci, const IbInventory& ib);
// Pure: the findings and the per-device metrics.
CheckResult evaluate_pcie(const PcieFacts& facts, const PcieSettings& cfg);
CheckResult run_pcie_check(const CheckContext& ctx);

}  // namespace gpudiag
