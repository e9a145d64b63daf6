// The YAML config: yaml-cpp's tree into our Config. Any text must give a Config or an
// error that starts with "gpudiag:"; never an exception, never a crash.
#include "fuzz/fuzz_input.h"
#include "config/config.h"
#include "config/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  auto cfg = gpudiag::parse_config(text, "fuzz.yaml");
  if (!cfg) GPUDIAG_FUZZ_CHECK(cfg.error().rfind("gpudiag: ", 0) == 0);
  return 0;
}
