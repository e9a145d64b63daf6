// The output relay's pure half. The relay must lose no byte of what a task writes:
// whatever the bytes and however the reads split them, stripping the tags gives back
// the stream exactly, and every emitted line fits in one slurmstepd message.
//
// Input: byte 0 picks the line limit, byte 1 the read size; the rest is the stream.
#include <string>

#include "fuzz/fuzz_input.h"
#include "spank/relay/line_prefixer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::string tag = "[node-07:12]";
  std::size_t max_line = tag.size() + data[0];  // small limits split lines often
  if (data[0] >= 192) max_line = gpudiag::kSlurmIoMessage;
  std::size_t chunk = 1 + data[1] % 97;
  auto stream = gpudiag::fuzz::as_text(data + 2, size - 2);

  gpudiag::LinePrefixer p(tag, max_line);
  std::string out;
  for (std::size_t i = 0; i < stream.size(); i += chunk) p.feed(stream.substr(i, chunk), out);
  p.finish(out);
  GPUDIAG_FUZZ_CHECK(p.held() == 0);

  // Below tag + 66 bytes the prefixer keeps 64 bytes of payload so lines make progress.
  const std::size_t limit = tag.size() + 2 + p.max_payload();
  GPUDIAG_FUZZ_CHECK(limit == max_line || max_line < tag.size() + 2 + 64);
  for (auto line : gpudiag::fuzz::split(out, '\n')) {
    if (line.empty()) continue;  // after the final newline
    GPUDIAG_FUZZ_CHECK(line.size() + 1 <= limit);
    GPUDIAG_FUZZ_CHECK(line.substr(0, tag.size()) == tag);
  }
  GPUDIAG_FUZZ_CHECK(out.empty() || out.back() == '\n');
  GPUDIAG_FUZZ_CHECK(gpudiag::strip_prefixes(out, tag) == stream);
  return 0;
}
