#pragma once
// The iommu check: is DMA translated by an IOMMU (costly for GPUDirect RDMA and P2P),
// passed through, or is there no IOMMU at all.
#include <string>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

struct IommuFacts {
  int units = 0;                         // entries in /sys/class/iommu
  std::vector<std::string> group_types;  // /sys/kernel/iommu_groups/*/type, readable ones
  std::string cmdline;                   // /proc/cmdline
  std::vector<std::string> errors;       // files that could not be read or parsed
};

// The IOMMU-related words of a kernel command line ("intel_iommu=on iommu=pt").
std::vector<std::string> iommu_cmdline_args(const std::string& cmdline);
// "off", "passthrough" or "translated".
std::string iommu_mode(const IommuFacts& facts);

// Pure: the findings for facts read elsewhere.
CheckResult evaluate_iommu(const IommuFacts& facts, const IommuSettings& settings);
IommuFacts read_iommu_facts(const RootedFs& fs);
CheckResult run_iommu_check(const CheckContext& ctx);

}  // namespace gpudiag
