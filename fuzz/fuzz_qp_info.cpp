// An RDMA queue pair's details (fabric/qp_info.*) come from another node's task through
// srun: whatever parses is printable where it reaches a terminal, within the ranges
// verbs takes, and formats back to the same text.
#include <string>

#include "fabric/qp_info.h"
#include "fuzz/fuzz_input.h"
#include "util/control_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpudiag::fabric;
  const std::string text(gpudiag::fuzz::as_text(data, size));
  if (auto q = parse_qp_info(text)) {
    GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(q->hca) && q->hca.find(' ') == std::string::npos);
    GPUDIAG_FUZZ_CHECK(q->qpn <= 0xffffff && q->psn <= 0xffffff && q->mtu >= 1 && q->mtu <= 5 && q->port >= 1);
    GPUDIAG_FUZZ_CHECK(q->length > 0 && q->length <= (64u << 20));
    GPUDIAG_FUZZ_CHECK(format_qp_info(*q) == text);
  }
  return 0;
}
