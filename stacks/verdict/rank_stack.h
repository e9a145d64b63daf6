#pragma once
// Where one rank is, as the step's merge sees it (issue 31.2): the frames that decide its
// class, innermost first, normalised so that ranks in the same place compare equal
// (no addresses, no offsets, no arguments). Each node's hang report carries one line per
// rank in a form the merge reads back from every node's file on shared storage.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

enum class StackSource { none, python, native, wchan };
std::string_view source_name(StackSource s);  // "none", "python", "native", "wchan"

struct RankStack {
  int rank = -1;  // -1: Slurm did not say
  std::string node;
  StackSource source = StackSource::none;
  std::vector<std::string> frames;  // innermost first; empty with source none
  std::string why;                  // source none: why there are no frames
};

// Bounds on what one rank contributes, so that a merge of thousands of ranks stays small
// whatever a process's stack (or a tampered report) holds.
constexpr std::size_t kMaxRankFrames = 48;
constexpr std::size_t kMaxFrameBytes = 240;
constexpr std::size_t kMaxWhyBytes = 400;

// A frame as the merge keeps it: one printable line, at most kMaxFrameBytes.
std::string bounded_frame(std::string_view text);

// The line a node's report carries for one rank, starting at column 0 with
// kRankStackTag; every field is escaped, so no field holds a tab or a newline. At most
// kMaxRankLineBytes with its newline: the outermost frames that do not fit are left out,
// so that the line crosses gpudiag's own output relay (`gpudiag stacks` runs through
// srun) whole, tag included, in one slurmstepd message of 1024 bytes.
inline constexpr std::string_view kRankStackTag = "gpudiag-rank-stack";
constexpr std::size_t kMaxRankLineBytes = 900;
std::string rank_stack_line(const RankStack& s);
// Pure: the ranks of one node's report (its kRankStackTag lines; everything else is
// skipped). Lines that do not parse are skipped; at most `max_ranks` are kept.
std::vector<RankStack> rank_stacks_in_report(std::string_view report, std::size_t max_ranks);
// Pure: the same from srun's output of `gpudiag stacks --local` on every node, where the
// relay may have put its tag in front ("[n1:0] gpudiag-rank-stack..."): a tag is one word
// and a space, never indented (process text in a report always is).
std::vector<RankStack> rank_stacks_in_output(std::string_view output, std::size_t max_ranks);

}  // namespace gpudiag
