// /sys/class/infiniband/*/ports/*/{state,rate,link_layer}: one input, all three
// parsers, because garbage in one of these files looks the same to each.
#include "fuzz/fuzz_input.h"
#include "nodeinfo/ib_attrs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  auto state = gpudiag::parse_port_state(text, "mlx5_0/ports/1/state");
  auto rate = gpudiag::parse_rate_gbps(text, "mlx5_0/ports/1/rate");
  if (rate) GPUDIAG_FUZZ_CHECK(*rate >= 0);
  auto layer = gpudiag::parse_link_layer(text, "mlx5_0/ports/1/link_layer");
  (void)state;
  (void)layer;
  return 0;
}
