#pragma once
// Splits one output stream into tagged lines, the pure half of the output relay.
//
// Every emitted line is TAG SEP PAYLOAD '\n' and at most `max_line` bytes long, because
// slurmstepd forwards a task's output in messages of at most 1024 bytes: a longer line
// reaches srun in pieces that interleave with other tasks' lines, and a piece without
// its tag could not be told apart. SEP says where the newline came from:
//   ' '  the payload ended with its own newline: a whole line, or the last piece of one;
//   '+'  the relay added the newline: the line goes on in this stream's next line (or,
//        at the end of the stream, the program wrote no final newline).
// So removing the tags is exact: per stream, join payloads, and put back the newline
// only after ' ' lines (see strip_prefixes). Any bytes pass through, NULs included.
#include <cstddef>
#include <string>
#include <string_view>

#include "spank/plan/relay_plan.h"  // kSlurmIoMessage

namespace gpudiag {

// What a relay may hold of a task's output (issue 30.3). Tagging grows a stream up to
// (tag + 3) times (a bare newline becomes a whole tagged line), so a relay reads no more
// than fits its budget after tagging (relay_read_limit), and reads again only once srun
// took it: the rest waits in the task's pipe, which is the user's memory. Per stream:
// this much tagged output, and one partial line (LinePrefixer::held).
constexpr std::size_t kRelayStreamBudget = 64 * 1024;
// Across all the streams of a step that the node's relay thread (in root's slurmstepd)
// holds at once.
constexpr std::size_t kRelayStepBudget = 1024 * 1024;

// What a relay writes, once per stream, when it runs out of memory tagging it and passes
// the rest through as it is (both relays).
inline constexpr std::string_view kUntaggedNotice = "gpudiag: output relay failed; passing output through untagged\n";

class LinePrefixer {
 public:
  LinePrefixer(std::string tag, std::size_t max_line = kSlurmIoMessage);

  // Appends to `out` every line that `data` completes; holds a partial line. Neither
  // allocates once `out` has room for max_output(data.size()) more (max_output(0) for
  // finish): a relay that reserves that first runs out of memory before any byte moved.
  void feed(std::string_view data, std::string& out);
  // End of stream: emits a held partial line, marked '+'.
  void finish(std::string& out);
  std::size_t held() const { return held_.size(); }
  // The partial line held: what a relay that stops tagging still owes the stream first.
  std::string_view held_bytes() const { return held_; }
  std::size_t max_payload() const { return max_payload_; }
  // The most bytes that feed() of n bytes and then finish() may append together.
  std::size_t max_output(std::size_t n) const;
  // The most input bytes whose max_output fits `budget`; 0 when not even one byte does.
  std::size_t input_for(std::size_t budget) const;

 private:
  void emit(std::string_view payload, char sep, std::string& out) const;

  std::string tag_;
  std::size_t max_payload_;
  std::string held_;
};

// How many bytes a relay may read from a stream now so that what it then holds of it, tagged
// (`lines`) or as it is, stays within `room`. The one rule both relays read by.
std::size_t relay_read_limit(const LinePrefixer& lines, bool tagged, std::size_t room);

// The inverse, for tests and tools: the original bytes of the stream whose lines carry
// `tag`. Every other line (other ranks, srun's own messages) is skipped.
std::string strip_prefixes(std::string_view text, std::string_view tag);

}  // namespace gpudiag
