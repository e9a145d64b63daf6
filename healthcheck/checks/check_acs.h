#pragma once
// The acs check: PCIe Access Control Services on the bridges between each GPU/RDMA NIC
// and the root complex. ReqRedir/CmpltRedir on a switch port sends GPU-GPU and
// GPU-NIC traffic up through the root complex: slow P2P, or hangs.
#include <map>
#include <string>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

struct AcsBridge {
  std::string bdf;
  Result<std::string> config = Result<std::string>::failure("not read");  // raw config space
  std::vector<std::string> below;  // "GPU 0000:13:00.0", "NIC mlx5_0 (0000:15:00.0)"
};

// Pure: findings for the bridges above the devices of interest.
CheckResult evaluate_acs(const std::vector<AcsBridge>& bridges, int gpus, int nics, Policy policy);
CheckResult run_acs_check(const CheckContext& ctx);

}  // namespace gpudiag
