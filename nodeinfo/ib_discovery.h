#pragma once
// Finds the InfiniBand/RoCE HCAs and their ports under /sys/class/infiniband. Shared by
// the health check and the plugin (NCCL_IB_HCA=auto, preflight).
#include <string>
#include <vector>

#include "nodeinfo/ib_attrs.h"
#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

struct IbPort {
  std::string hca;
  int number = 0;
  Result<PortState> state = Result<PortState>::failure("not read");
  Result<PortState> phys_state = Result<PortState>::failure("not read");
  Result<double> rate_gbps = Result<double>::failure("not read");
  std::string rate_text;  // as the kernel wrote it, for messages
  Result<std::string> link_layer = Result<std::string>::failure("not read");

  std::string subject() const { return hca + ":" + std::to_string(number); }
  bool is_up() const {
    return state && state->code == kPortActive && phys_state && phys_state->code == kPhysLinkUp;
  }
};

struct IbHca {
  std::string name;
  std::string pci_bdf;  // empty when the device link is missing or broken
  std::string error;    // set when the HCA's ports could not be listed
  std::string model;    // hca_type ("MT4129"); empty when unreadable or absent (EFA has none)
  // The kernel driver bound to the PCI device (the basename of device/driver):
  // "mlx5_core", "efa", "bnxt_en", "irdma"... Empty when the link is missing.
  std::string driver;
  std::string pci_id;  // "15b3:1021" (vendor:device of the PCI function); empty when unreadable
  std::vector<std::string> netdevs;  // device/net/*: the network interfaces of its PCI function
  std::vector<IbPort> ports;
  // What tells identical devices apart from others: hca_type where the driver has one,
  // else the PCI vendor:device.
  std::string kind() const { return model.empty() ? pci_id : model; }
};

struct IbInventory {
  bool class_present = false;  // /sys/class/infiniband exists (the IB core is loaded)
  std::vector<IbHca> hcas;
};

IbInventory discover_ib(const RootedFs& fs);

}  // namespace gpudiag
