// /proc/cmdline into the iommu check's view of it.
#include <string>

#include "fuzz/fuzz_input.h"
#include "healthcheck/checks/check_iommu.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpudiag::IommuFacts facts;
  facts.cmdline = std::string(gpudiag::fuzz::as_text(data, size));
  facts.units = size % 3;  // with and without IOMMU units, from the same text
  (void)gpudiag::iommu_cmdline_args(facts.cmdline);
  auto mode = gpudiag::iommu_mode(facts);
  GPUDIAG_FUZZ_CHECK(mode == "off" || mode == "passthrough" || mode == "translated");
  auto r = gpudiag::evaluate_iommu(facts, gpudiag::IommuSettings{});
  GPUDIAG_FUZZ_CHECK(r.name == "iommu");
  return 0;
}
