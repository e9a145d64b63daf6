// The --diag list (from srun's command line and SLURM_SPANK__SLURM_SPANK_OPTION_*):
// the first line is parsed alone, then the rest on top of it, as the environment
// value and the option combine in the plugin.
#include "fuzz/fuzz_input.h"
#include "spank/plan/diag_options.h"
#include "spank/plan/env_writer.h"

namespace {
// What a parsed list feeds into the task's environment must be one printable line.
void check_env_values(const gpudiag::DiagOptions& d) {
  GPUDIAG_FUZZ_CHECK(gpudiag::safe_env_value(d.nccl_level));
  GPUDIAG_FUZZ_CHECK(gpudiag::safe_env_value(d.nccl_subsys));
  GPUDIAG_FUZZ_CHECK(gpudiag::safe_env_value(d.dir));
  GPUDIAG_FUZZ_CHECK(d.dir.empty() || d.dir[0] == '/');
  if (d.hang_s) GPUDIAG_FUZZ_CHECK(*d.hang_s >= 0);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  std::size_t nl = text.find('\n');
  auto first = gpudiag::parse_diag_list(text.substr(0, nl));
  if (!first) {
    GPUDIAG_FUZZ_CHECK(first.error().rfind("gpudiag: ", 0) == 0);
    return 0;
  }
  check_env_values(*first);
  // Never more than slurmstepd can read back on the nodes.
  GPUDIAG_FUZZ_CHECK(text.substr(0, nl).size() <= gpudiag::kMaxDiagListBytes);
  if (nl != std::string_view::npos) {
    auto both = gpudiag::parse_diag_list(text.substr(nl + 1), *first);
    if (!both) GPUDIAG_FUZZ_CHECK(both.error().rfind("gpudiag: ", 0) == 0);
    else check_env_values(*both);
  }
  return 0;
}
