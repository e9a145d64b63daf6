// The lines of --diag=fabric (fabric/fabric_wire.*): srun parses a hello and test reports
// from any connection to its port, a node's listener parses a data header from anyone, a
// task parses srun's orders. Whatever parses formats back to what parses the same, and a
// node name or value that reaches the user's terminal is printable.
#include <string>

#include "fabric/fabric_wire.h"
#include "fuzz/fuzz_input.h"
#include "util/control_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpudiag::fabric;
  const std::string text(gpudiag::fuzz::as_text(data, size));
  const std::string token(32, 'a');
  if (auto h = parse_hello(text, token)) {
    GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(h->node) && h->node.find(' ') == std::string::npos);
    for (const auto& [k, v] : h->env) GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(v));
    std::string again = format_hello(token, *h);
    again.pop_back();
    auto back = parse_hello(again, token);
    GPUDIAG_FUZZ_CHECK(back && back->env == h->env && back->node == h->node && back->rank == h->rank);
  }
  if (auto r = parse_test_report(text)) GPUDIAG_FUZZ_CHECK(format_test_report(*r) == text + "\n");
  if (auto o = parse_order(text)) GPUDIAG_FUZZ_CHECK(format_order(*o) == text + "\n");
  if (auto from = parse_data_header(text, token)) GPUDIAG_FUZZ_CHECK(format_data_header(token, *from) == text + "\n");
  if (auto e = parse_endpoint(text)) GPUDIAG_FUZZ_CHECK(format_endpoint(*e) == text && e->port > 0);
  return 0;
}
