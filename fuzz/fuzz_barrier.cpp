// The preflight barrier's lines (spank/preflight/preflight_barrier.*): srun parses a report from
// any connection to its port, a task parses srun's verdict and SLURM_GPUDIAG_PREFLIGHT_BARRIER.
// Whatever parses formats back to the same bytes, and a node name that reaches the
// user's terminal is one printable word.
#include <string>

#include "fuzz/fuzz_input.h"
#include "util/control_bytes.h"
#include "spank/preflight/preflight_barrier.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(gpudiag::fuzz::as_text(data, size));
  if (auto r = gpudiag::parse_barrier_report(text)) {
    GPUDIAG_FUZZ_CHECK(gpudiag::format_barrier_report(*r) == text + "\n");
    GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(r->node) && r->node.find(' ') == std::string::npos);
    GPUDIAG_FUZZ_CHECK(r->token.size() == 32);
  }
  if (auto v = gpudiag::parse_barrier_verdict(text)) {
    GPUDIAG_FUZZ_CHECK(gpudiag::format_barrier_verdict(*v) == text + "\n");
    GPUDIAG_FUZZ_CHECK(v->go || gpudiag::is_one_printable_line(v->failed_node));
  }
  if (auto e = gpudiag::parse_barrier_env(text)) {
    GPUDIAG_FUZZ_CHECK(gpudiag::format_barrier_env(*e) == text);
    GPUDIAG_FUZZ_CHECK(e->port > 0 && e->port <= 65535);
  }
  // The tally takes any parsed report; the verdict names only a node a report named.
  gpudiag::BarrierTally t;
  t.total = 2;
  if (auto r = gpudiag::parse_barrier_report(text)) {
    gpudiag::tally_report(t, *r);
    if (auto v = gpudiag::barrier_verdict(t)) GPUDIAG_FUZZ_CHECK(v->go ? false : v->failed_node == r->node);
  }
  return 0;
}
