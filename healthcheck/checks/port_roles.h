#pragma once
// What each RDMA port is for (config/config.h PortRole), told from the node itself where
// it can be and from ib.roles where it cannot. A node's fabric is what NCCL would pick:
// for each GPU the RDMA devices nearest to it on PCIe, of the kind most of them are. The
// rest carries storage (InfiniBand), the front-end network (Ethernet, bonds) or nothing
// (no link partner: not cabled). The ib check compares a port only with ports of its role
// and holds it to its role's expectations; --baseline records the roles so that every
// node of a family agrees, whatever state a port is in there.
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_devices.h"

namespace gpudiag {

// PCIe distance (links between two devices through their nearest common bridge) when
// they share none: on the same NUMA node, or not known to be.
constexpr int kSameNuma = 1000;
constexpr int kNoPath = 2000;

// One port as the role rule sees it.
struct RolePort {
  std::string hca;
  int port = 0;
  std::string kind;                  // IbHca::kind(): hca_type, else PCI vendor:device
  std::vector<std::string> netdevs;  // of its PCI function
  std::string link_layer;            // "" when unreadable
  bool link = false;                 // phys_state LinkUp: a partner is plugged in and trained
  std::string phys;                  // phys_state's name, for the reason ("Polling")
  std::vector<int> gpu_distance;     // to each GPU of the node, in one order for all ports
  std::string subject() const { return hca + ":" + std::to_string(port); }
};

struct RoleOf {
  PortRole role = PortRole::fabric;
  std::string why;          // "nearest to a GPU on PCIe", "ib.roles (line 12)"
  bool from_config = false;
};

// subject ("mlx5_0:1") -> its role.
using PortRoles = std::map<std::string, RoleOf>;

// Pure: the role of every port. `gpus` is how many GPUs the distances are to (0: none on
// this node, or not known).
PortRoles assign_roles(const std::vector<RolePort>& ports, int gpus, const std::vector<RoleRule>& rules);

// Links between a and b through their nearest common bridge; kSameNuma or kNoPath when
// they share none.
int pcie_distance(const PciDevice& a, const PciDevice& b);

// The facts for assign_roles, for the HCAs the ib checks look at. `pci` null: no PCI
// facts (every port is then taken for the fabric, bonds aside).
std::vector<RolePort> role_ports(const IbInventory& ib, const PciInventory* pci, const IbExpect& expect,
                                 int* gpus = nullptr);
PortRoles port_roles(const IbInventory& ib, const PciInventory* pci, const IbExpect& expect);

// A port's role, fabric when the map does not name it.
RoleOf role_of(const PortRoles& roles, const std::string& subject);

}  // namespace gpudiag
