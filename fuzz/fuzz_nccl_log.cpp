// NCCL debug output, line by line, through the line parser, every fact extractor (by
// way of the analyzer), the diagnosis and both reports.
#include "fuzz/fuzz_input.h"
#include "nccllog/nccl_log_analyzer.h"
#include "nccllog/nccl_log_line.h"
#include "nccllog/nccl_log_problems.h"
#include "nccllog/nccl_log_report.h"
#include "util/control_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpudiag::NcclLogAnalyzer a;
  for (auto line : gpudiag::fuzz::split(gpudiag::fuzz::as_text(data, size), '\n')) {
    (void)gpudiag::parse_nccl_line(line);
    a.add_line(line, "fuzz.log");
  }
  a.add_bytes(size);
  auto analysis = a.finish();
  // What the analysis keeps is bounded by its caps, whatever the input (adversary2 B3).
  GPUDIAG_FUZZ_CHECK(analysis.processes.size() <= gpudiag::kMaxProcesses);
  GPUDIAG_FUZZ_CHECK(analysis.warnings.size() <= gpudiag::kMaxWarnGroups);
  auto problems = gpudiag::diagnose(analysis, {"node1"});
  (void)gpudiag::format_nccl_report(analysis, problems);
  // What --json prints: no control byte but the JSON's own newlines (issue 30).
  const std::string json = gpudiag::nccl_report_json_text(analysis, problems);
  for (std::size_t i = 0; i < json.size(); ++i)
    GPUDIAG_FUZZ_CHECK(gpudiag::control_length(json, i) == 0 || json[i] == '\n');
  auto line = gpudiag::nccl_summary_line(analysis, problems);
  GPUDIAG_FUZZ_CHECK(line.find('\n') == std::string::npos);
  return 0;
}
