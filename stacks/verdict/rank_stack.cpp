#include "stacks/verdict/rank_stack.h"

#include <charconv>

#include "util/control_bytes.h"

namespace gpudiag {
namespace {

std::string bounded(std::string_view text, std::size_t max) {
  std::string s = escape_control(text.substr(0, max));
  if (s.size() > max) s.resize(max);  // an escape may have grown it
  return s;
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (out.size() < kMaxRankFrames + 8) {
    std::size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  return out;
}

bool source_of(std::string_view name, StackSource& s) {
  for (StackSource c : {StackSource::none, StackSource::python, StackSource::native, StackSource::wchan})
    if (name == source_name(c)) {
      s = c;
      return true;
    }
  return false;
}

}  // namespace

std::string_view source_name(StackSource s) {
  switch (s) {
    case StackSource::python: return "python";
    case StackSource::native: return "native";
    case StackSource::wchan: return "wchan";
    case StackSource::none: break;
  }
  return "none";
}

std::string bounded_frame(std::string_view text) { return bounded(text, kMaxFrameBytes); }

// gpudiag-rank-stack <TAB> rank <TAB> node <TAB> source <TAB> why <TAB> frame <TAB> frame ...
std::string rank_stack_line(const RankStack& s) {
  std::string line(kRankStackTag);
  line += "\t" + std::to_string(s.rank) + "\t" + bounded(s.node, 128) + "\t" + std::string(source_name(s.source)) + "\t" +
          bounded(s.why, kMaxWhyBytes);
  if (line.size() + 1 > kMaxRankLineBytes) line.resize(kMaxRankLineBytes - 1);  // a why that long is cut
  std::size_t n = 0;
  for (const auto& f : s.frames) {
    if (n++ == kMaxRankFrames) break;
    std::string field = "\t" + bounded_frame(f);
    if (line.size() + field.size() + 1 > kMaxRankLineBytes) break;
    line += field;
  }
  return line + "\n";
}

namespace {

// `tagged`: a relay tag (one word and a space) may stand in front of the line.
std::vector<RankStack> rank_lines(std::string_view text, std::size_t max_ranks, bool tagged) {
  std::vector<RankStack> out;
  std::size_t pos = 0;
  while (pos < text.size() && out.size() < max_ranks) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (tagged && line.substr(0, kRankStackTag.size()) != kRankStackTag) {
      std::size_t sp = line.find(' ');
      if (sp == 0 || sp == std::string_view::npos || line.substr(0, sp).find('\t') != std::string_view::npos) continue;
      line.remove_prefix(sp + 1);
    }
    if (line.substr(0, kRankStackTag.size()) != kRankStackTag) continue;
    auto f = split_tabs(line);
    if (f.size() < 5 || f[0] != kRankStackTag) continue;
    RankStack s;
    auto [p, ec] = std::from_chars(f[1].data(), f[1].data() + f[1].size(), s.rank);
    if (ec != std::errc() || p != f[1].data() + f[1].size() || s.rank < -1 || f[2].empty()) continue;
    if (!source_of(f[3], s.source)) continue;
    s.node = bounded(f[2], 128);
    s.why = bounded(f[4], kMaxWhyBytes);
    for (std::size_t i = 5; i < f.size() && s.frames.size() < kMaxRankFrames; ++i) s.frames.push_back(bounded_frame(f[i]));
    if ((s.source == StackSource::none) != s.frames.empty()) continue;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<RankStack> rank_stacks_in_report(std::string_view report, std::size_t max_ranks) {
  return rank_lines(report, max_ranks, false);
}

std::vector<RankStack> rank_stacks_in_output(std::string_view output, std::size_t max_ranks) {
  return rank_lines(output, max_ranks, true);
}

}  // namespace gpudiag
