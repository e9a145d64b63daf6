// Numeric sysfs attributes (numa_node, vendor and device ids, class) and the
// durations and sizes of config values and --diag options.
#include "fuzz/fuzz_input.h"
#include "util/duration.h"
#include "nodeinfo/gpudirect_facts.h"
#include "nodeinfo/pcie_links.h"
#include "nodeinfo/sysfs_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  (void)gpudiag::parse_int_attr(text, "0000:3b:00.0/numa_node");
  (void)gpudiag::parse_hex_attr(text, "0000:3b:00.0/vendor");
  (void)gpudiag::attribute_text(text, "0000:3b:00.0/current_link_speed");
  if (auto d = gpudiag::parse_duration(text)) GPUDIAG_FUZZ_CHECK(*d >= 0);
  (void)gpudiag::parse_size(text);
  if (auto s = gpudiag::parse_link_speed_gts(text, "current_link_speed")) GPUDIAG_FUZZ_CHECK(*s > 0 && *s <= 1024);
  if (auto w = gpudiag::parse_link_width(text, "current_link_width")) GPUDIAG_FUZZ_CHECK(*w >= 1 && *w <= 32);
  if (auto k = gpudiag::parse_kernel_release(text)) GPUDIAG_FUZZ_CHECK(k->major >= 0 && k->minor >= 0);
  if (auto d = gpudiag::parse_nvidia_version(text)) GPUDIAG_FUZZ_CHECK(!d->version.empty() && d->major >= 0);
  (void)gpudiag::parse_memlock_limit(text);
  return 0;
}
