#pragma once
// `gpudiag-health --baseline`, first half: what a known-good node has, read the same way
// the checks read it (through --fs-root), and the GPU model from the probe where a
// driver can be asked.
#include <optional>
#include <string>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/checks/port_roles.h"
#include "nodeinfo/ib_discovery.h"

namespace gpudiag {

// One PCIe device's trained link, from current_link_{width,speed} in sysfs.
struct PcieLinkFact {
  std::string bdf;
  std::string name;  // "GPU 0000:13:00.0" or the HCA's name
  std::optional<int> width;
  std::optional<double> speed_gts;  // 32 for "32.0 GT/s PCIe"
};

struct BaselineFacts {
  std::string host;  // the node's short name, from the (rooted) kernel
  IbInventory ib;
  PortRoles roles;  // what each port is for, as the ib check tells it (with the loaded ib.roles)
  std::string pci_error;  // PCI devices could not be listed
  int pci_gpus = 0;
  std::vector<PcieLinkFact> gpu_links;
  std::vector<PcieLinkFact> hca_links;  // every HCA with a PCI device; the judge filters
  std::string iommu_mode;
  std::vector<std::string> iommu_errors;
  // NVML's names, one per GPU the driver sees; empty with `gpu_note` saying why.
  std::optional<std::vector<std::string>> gpu_names;
  std::string gpu_note;
};


BaselineFacts gather_baseline_facts(const CheckContext& ctx);

}  // namespace gpudiag
