// PCI config space (/sys/bus/pci/devices/*/config): the standard capability walk for
// the port type and the extended walk for ACS. Loops and out-of-range pointers must
// end the walk, never read past the buffer (ASan sees to that).
#include "fuzz/fuzz_input.h"
#include "nodeinfo/pci_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto config = gpudiag::fuzz::as_text(data, size);
  if (auto t = gpudiag::pcie_port_type(config)) (void)gpudiag::port_type_name(*t);
  auto acs = gpudiag::find_acs(config);
  if (acs.kind == gpudiag::AcsLookup::Kind::found) {
    GPUDIAG_FUZZ_CHECK(acs.offset >= 0x100 && acs.offset + 8u <= size);
    (void)gpudiag::acs_bit_names(acs.ctrl);
  }
  return 0;
}
