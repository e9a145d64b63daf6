// The hang verdict's parsers of outside input (issue 31): a node's report as srun reads it
// back from the diag dir (any file there may be tampered with), and what the stack tools
// print about any process, and torch's flight-recorder dumps (pickles). Properties: the merge's verdict is at most five lines, each
// one printable line; every frame kept is bounded.
#include "fuzz/fuzz_input.h"
#include "stacks/verdict/flight_recorder.h"
#include "stacks/verdict/hang_verdict.h"
#include "stacks/verdict/rank_stack.h"
#include "stacks/verdict/stack_classes.h"
#include "stacks/verdict/stack_frames.h"
#include "util/control_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  auto ranks = gpudiag::rank_stacks_in_report(text, 4096);
  for (const auto& r : ranks) {
    GPUDIAG_FUZZ_CHECK(r.frames.size() <= gpudiag::kMaxRankFrames);
    for (const auto& f : r.frames) GPUDIAG_FUZZ_CHECK(f.size() <= gpudiag::kMaxFrameBytes);
    GPUDIAG_FUZZ_CHECK(gpudiag::rank_stacks_in_report(gpudiag::rank_stack_line(r), 2).size() == 1);
  }
  gpudiag::VerdictInputs in;
  in.classes = gpudiag::stack_classes(ranks);
  in.nodes_reported = 1;
  in.diag_dir = "/d";
  (void)gpudiag::classes_text(in.classes);
  auto lines = gpudiag::hang_verdict(in);
  GPUDIAG_FUZZ_CHECK(lines.size() <= gpudiag::kMaxVerdictLines);
  for (const auto& l : lines) {
    GPUDIAG_FUZZ_CHECK(!l.empty() && l.back() == '\n');
    GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(std::string_view(l).substr(0, l.size() - 1)));
  }
  const long tid = size ? static_cast<long>(data[0]) : 0;
  for (auto frames : {gpudiag::eu_stack_frames(text, tid), gpudiag::gdb_frames(text, tid)})
    for (const auto& f : gpudiag::native_class_frames(frames)) GPUDIAG_FUZZ_CHECK(f.size() <= gpudiag::kMaxFrameBytes);
  GPUDIAG_FUZZ_CHECK(gpudiag::py_spy_frames(text).size() <= gpudiag::kMaxRankFrames);
  // torch's flight-recorder dump (a pickle): read or refused, and one printable line.
  auto fr = gpudiag::flight_rank_from_dump(text, 0);
  auto line = gpudiag::flight_finding({fr}, {{"n1", 0}});
  GPUDIAG_FUZZ_CHECK(line.empty() || (line.back() == '\n' && gpudiag::is_one_printable_line(
                                                               std::string_view(line).substr(0, line.size() - 1))));
  return 0;
}
