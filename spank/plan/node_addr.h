#pragma once
// What Slurm's node table says about the step's first node (slurm/slurm_node_addr.h
// reads it in slurmstepd); the plan picks MASTER_ADDR from it (choose_master_addr).
#include <string>

namespace gpudiag {

struct SlurmNodeAddr {
  std::string address;   // numeric (getnameinfo NI_NUMERICHOST); "" when Slurm has none
  std::string hostname;  // NodeHostname; "" when unknown
};

}  // namespace gpudiag
