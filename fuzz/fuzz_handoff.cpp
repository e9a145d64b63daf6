// The node relay's handoff message (spank/relay/node_relay_wire.h), which the relay thread in
// root's slurmstepd decodes from whatever a task sends. Whatever the bytes: no crash, and
// what decodes is in bounds and encodes back to the same bytes (one form per message).
#include <string>

#include "fuzz/fuzz_input.h"
#include "spank/relay/node_relay_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto bytes = gpudiag::fuzz::as_text(data, size);
  auto h = gpudiag::decode_handoff(bytes);
  if (!h) return 0;
  GPUDIAG_FUZZ_CHECK(h->out || h->err);
  GPUDIAG_FUZZ_CHECK(h->tag.size() <= gpudiag::kMaxHandoffTag);
  GPUDIAG_FUZZ_CHECK(h->max_line >= 16 && h->max_line <= gpudiag::kMaxHandoffLine);
  GPUDIAG_FUZZ_CHECK(gpudiag::handoff_fd_count(*h) == 3 || gpudiag::handoff_fd_count(*h) == 5);
  GPUDIAG_FUZZ_CHECK(gpudiag::handoff_fd_count(*h) <= gpudiag::kMaxHandoffFds);
  auto again = gpudiag::encode_handoff(*h);
  GPUDIAG_FUZZ_CHECK(again && *again == bytes);
  return 0;
}
