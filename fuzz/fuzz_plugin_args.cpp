// plugstack.conf arguments: one per line of the input, as Slurm splits them on blanks.
#include <string>

#include "fuzz/fuzz_input.h"
#include "spank/slurm/plugin_args.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  for (auto a : gpudiag::fuzz::split(gpudiag::fuzz::as_text(data, size), '\n')) args.emplace_back(a);
  auto parsed = gpudiag::parse_plugin_args(args);
  if (!parsed) GPUDIAG_FUZZ_CHECK(parsed.error().rfind("gpudiag: ", 0) == 0);
  return 0;
}
