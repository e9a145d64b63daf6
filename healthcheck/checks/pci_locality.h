#pragma once
// Where GPUs and NICs sit: NUMA node and PCIe switch, from an hwloc topology loaded
// from the same fs-root as every other read (HWLOC_FSROOT).
#include <map>
#include <string>
#include <vector>

namespace gpudiag {

struct PciPlace {
  int numa = -1;            // -1 when hwloc cannot place it on one NUMA node
  std::string switch_bdf;   // the switch's upstream port, "" when directly under a root port
  std::vector<std::string> os_devices;  // e.g. mlx5_0
};

struct PciLocality {
  std::string error;  // hwloc could not load the topology
  std::map<std::string, PciPlace> by_bdf;
};

PciLocality load_pci_locality(const std::string& fs_root);

}  // namespace gpudiag
