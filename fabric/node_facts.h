#pragma once
// Gathers what NCCL and torch will meet on this node (the node's first task, as the
// user): the driver, the kernel, libibverbs, the HCAs and interfaces. Reads only; under
// `fs_root` a fixture tree stands in for /sys and /proc.
#include <string>

#include "fabric/fabric_wire.h"

namespace gpudiag::fabric {

NodeFacts gather_node_facts(const std::string& fs_root);

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ..." -> "550.54.15".
std::string driver_version(const std::string& proc_driver_nvidia_version);

}  // namespace gpudiag::fabric
