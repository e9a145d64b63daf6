// The GPU probe's stdout as gpudiag-health reads it: interpret_probe, then whichever
// of the gpu, p2p and nccl evaluations the object feeds. A probe from another version,
// or a broken one, must give findings, never an exception (nlohmann's type_error
// escaping here would abort the whole health run).
#include "fuzz/fuzz_input.h"
#include "healthcheck/checks/check_nccl.h"
#include "healthcheck/checks/check_p2p.h"
#include "healthcheck/checks/gpu_driver_view.h"
#include "healthcheck/checks/gpu_probe.h"
#include "healthcheck/report/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpudiag::CommandResult run;
  run.started = true;
  run.exit_code = 0;
  run.out = std::string(gpudiag::fuzz::as_text(data, size));
  gpudiag::GpuExpect expect;
  expect.count = 8;
  expect.model = "*H100*";
  auto outcome = gpudiag::interpret_probe(run, "/usr/libexec/gpudiag/gpudiag-gpu-probe", 40, expect);
  if (!outcome.ok()) return 0;

  gpudiag::Report report;
  gpudiag::CheckResult gpu{"gpu"};
  (void)gpudiag::add_driver_view(gpu, outcome.data, 8, expect);
  report.add(gpu);
  gpudiag::P2pSettings p2p;
  p2p.min_bandwidth_gbps = 100;
  report.add(gpudiag::evaluate_p2p(outcome.data, p2p));
  gpudiag::NcclCheckSettings nccl;
  nccl.min_bandwidth.push_back({"*H100*", 8, 400, 0});
  report.add(gpudiag::evaluate_nccl(outcome.data, nccl, expect));
  // Strings from the probe reach every output format.
  (void)gpudiag::format_human(report, true, false);
  (void)gpudiag::format_json(report);
  (void)gpudiag::format_nhc(report);
  (void)gpudiag::format_prometheus(report);
  return 0;
}
