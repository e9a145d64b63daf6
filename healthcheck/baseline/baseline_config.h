#pragma once
// `gpudiag-health --baseline`, second half (pure): from what a known-good node has, the
// expectations a site copies to its other nodes of that kind, and the config file that
// holds them with the rest of the loaded config kept as it is. LBNL NHC's nhc-genconf
// is the model.
#include <optional>
#include <string>
#include <vector>

#include "healthcheck/baseline/baseline_facts.h"
#include "config/config.h"

namespace gpudiag {

// The PCIe floors (helper A's `pcie:` keys): the lowest trained link of each kind.
struct PcieFloors {
  std::optional<int> gpu_width, nic_width;
  std::optional<double> gpu_speed, nic_speed;
};

// A port whose role --baseline writes into ib.roles: every one the node itself does not
// take for the GPU fabric, so that a copy agrees whatever state the port is in there.
struct RecordedRole {
  std::string hca;
  std::optional<int> port;  // absent: every port of the device
  PortRole role = PortRole::fabric;
  std::string note;  // why, for the comment
};

struct Baseline {
  IbExpect ib;  // ib.rate_gbps/link_layer: the GPU fabric's; ib.storage/frontend: theirs
  std::vector<RecordedRole> roles;
  std::vector<std::string> auto_excluded;  // patterns added for bonded host-network HCAs
  std::optional<int> gpu_count;
  std::string gpu_model;  // a pattern such as "*H100*"; empty when the driver was not asked
  std::string gpu_note;   // why gpu_model is empty
  std::string iommu_mode;
  PcieFloors pcie;
  // What looks wrong on its face (a port down, a link slower than its siblings): the
  // numbers above may be a sick node's.
  std::vector<std::string> doubts;
};

// "NVIDIA H100 80GB HBM3" -> "*H100*", "NVIDIA A100-SXM4-80GB" -> "*A100*".
std::string model_pattern(const std::string& nvml_name);

Baseline derive_baseline(const BaselineFacts& facts, const Config& loaded);

// The whole config: the baseline's keys, everything else from `loaded` (defaults where
// nothing was loaded). `date` goes into the header comment.
std::string baseline_yaml(const Baseline& b, const BaselineFacts& facts, const Config& loaded,
                          const std::string& date);

}  // namespace gpudiag
