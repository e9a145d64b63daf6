// Numeric sysfs attributes (numa_node, vendor and device ids, class) and the
// durations and sizes of config values and --diag options.
#include "fuzz/fuzz_input.h"
#include "nodeinfo/duration.h"
#include "nodeinfo/sysfs_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  (void)gpudiag::parse_int_attr(text, "0000:3b:00.0/numa_node");
  (void)gpudiag::parse_hex_attr(text, "0000:3b:00.0/vendor");
  (void)gpudiag::attribute_text(text, "0000:3b:00.0/current_link_speed");
  if (auto d = gpudiag::parse_duration(text)) GPUDIAG_FUZZ_CHECK(*d >= 0);
  (void)gpudiag::parse_size(text);
  return 0;
}
