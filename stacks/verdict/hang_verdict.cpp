#include "stacks/verdict/hang_verdict.h"

namespace gpudiag {
namespace {

bool nameless(const std::string& frame) { return frame.rfind("?? (", 0) == 0; }

// "all_reduce (distributed_c10d.py:1320)" -> "all_reduce"
std::string function_of(const std::string& frame, StackSource source) {
  if (source != StackSource::python) return frame;
  auto paren = frame.rfind(" (");
  return paren == std::string::npos ? frame : frame.substr(0, paren);
}

// A decorator's closure between the collective and the code that called it: torch 2.x
// wraps its collectives (`_exception_logger.<locals>.wrapper` in c10d_logger.py), and the
// place to name is the user's caller beyond it.
bool wrapper_frame(const std::string& function) {
  return function.find("<locals>.") != std::string::npos || function == "wrapper";
}

std::string bounded_line(std::string line) {
  if (line.size() > kMaxVerdictLineBytes) line = line.substr(0, kMaxVerdictLineBytes - 3) + "...";
  return line + "\n";
}

std::string plural(std::size_t n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); }

}  // namespace

std::string class_place(const StackClass& c) {
  if (c.source == StackSource::none) return "(no stack: " + c.why + ")";
  std::size_t i = 0;
  while (i + 1 < c.frames.size() && nameless(c.frames[i])) ++i;
  if (i >= c.frames.size()) return "??";
  std::string place = c.frames[i];
  std::size_t j = i + 1;
  while (j < c.frames.size() && nameless(c.frames[j])) ++j;
  std::size_t k = j;  // past torch's wrappers, where a caller of the user's lies beyond them
  while (c.source == StackSource::python && k + 1 < c.frames.size() &&
         (nameless(c.frames[k]) || wrapper_frame(function_of(c.frames[k], c.source))))
    ++k;
  if (k < c.frames.size()) j = k;
  if (j < c.frames.size()) place += " from " + function_of(c.frames[j], c.source);
  if (c.source == StackSource::wchan) place = "the kernel (" + place + ")";
  return place;
}

std::vector<std::string> hang_verdict(const VerdictInputs& in) {
  std::vector<std::string> lines;
  if (in.nodes_reported == 0) return lines;
  const std::string details = "gpudiag: stack classes and every rank's stacks: " +
                              (in.diag_dir.empty() ? std::string("the hang reports") : in.diag_dir + "/hang.*.txt");
  const StackClass* largest = nullptr;
  std::vector<const StackClass*> suspects, unknown;
  std::size_t known_ranks = 0, known_classes = 0;
  for (const auto& c : in.classes) {
    if (c.source == StackSource::none) {
      unknown.push_back(&c);
      continue;
    }
    ++known_classes;
    known_ranks += c.ranks.size();
    if (!largest) largest = &c;  // classes come largest first
    if (c.suspect) suspects.push_back(&c);
  }
  const std::string next = "look next at the NCCL logs (gpudiag nccl-log " +
                           (in.diag_dir.empty() ? std::string("DIAG_DIR") : in.diag_dir) +
                           ") and torch's flight recorder (fr_trace.rank* there)";
  if (!largest) {
    lines.push_back(bounded_line("gpudiag: hang: no rank's stack could be read; " + next));
  } else if (!suspects.empty()) {
    // Room for the suspects: five lines less the ones that always follow.
    std::size_t room = kMaxVerdictLines - 1 - (unknown.empty() ? 0 : 1) - std::min<std::size_t>(in.findings.size(), 2);
    room = std::max<std::size_t>(room, 1);
    for (std::size_t i = 0; i < suspects.size() && i < room; ++i) {
      const StackClass& s = *suspects[i];
      std::string line = "gpudiag: hang: " + compact_ranks(s.ranks, 120) + " in " + class_place(s);
      if (i == 0)
        line += ", while " + plural(largest->ranks.size(), "rank") + " " + compact_ranks(largest->ranks, 80) + " wait in " +
                class_place(*largest);
      if (i + 1 == room && suspects.size() > room)
        line += " (+" + std::to_string(suspects.size() - room) + " more suspect class(es))";
      lines.push_back(bounded_line(line));
    }
  } else if (known_classes == 1) {
    lines.push_back(bounded_line("gpudiag: hang: no rank stands out: all " + plural(known_ranks, "rank") + " " +
                                 compact_ranks(largest->ranks, 80) + " wait in " + class_place(*largest) + "; " + next));
  } else {
    lines.push_back(bounded_line("gpudiag: hang: no rank stands out: " + plural(known_ranks, "rank") + " in " +
                                 std::to_string(known_classes) + " classes of similar size (the largest, " +
                                 plural(largest->ranks.size(), "rank") + ", in " + class_place(*largest) + "); " + next));
  }
  if (!unknown.empty()) {
    std::vector<RankRef> who;
    for (const auto* c : unknown) who.insert(who.end(), c->ranks.begin(), c->ranks.end());
    lines.push_back(bounded_line("gpudiag: no stack for " + plural(who.size(), "rank") + " " + compact_ranks(who, 80) +
                                 ": " + unknown.front()->why));
  }
  for (const auto& f : in.findings) {
    if (lines.size() + 1 >= kMaxVerdictLines) break;
    lines.push_back(bounded_line(f));
  }
  lines.push_back(bounded_line(details));
  return lines;
}

}  // namespace gpudiag
