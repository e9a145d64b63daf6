#include "stacks/verdict/stack_classes.h"

#include <algorithm>
#include <unordered_map>

namespace gpudiag {
namespace {

std::string class_key(const RankStack& s) {
  std::string key(source_name(s.source));
  if (s.source == StackSource::none) return key + "\n" + s.why;
  for (const auto& f : s.frames) key += "\n" + f;
  return key;
}

bool rank_less(const RankRef& a, const RankRef& b) {
  return a.rank != b.rank ? a.rank < b.rank : a.node < b.node;
}

}  // namespace

std::vector<StackClass> stack_classes(std::vector<RankStack> ranks) {
  std::vector<StackClass> classes;
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(ranks.size());
  for (auto& r : ranks) {
    auto [it, fresh] = index.try_emplace(class_key(r), classes.size());
    if (fresh) {
      StackClass c;
      c.source = r.source;
      c.frames = std::move(r.frames);
      c.why = std::move(r.why);
      classes.push_back(std::move(c));
    }
    classes[it->second].ranks.push_back({std::move(r.node), r.rank});
  }
  for (auto& c : classes) std::sort(c.ranks.begin(), c.ranks.end(), rank_less);
  std::sort(classes.begin(), classes.end(), [](const StackClass& a, const StackClass& b) {
    const bool a_known = a.source != StackSource::none, b_known = b.source != StackSource::none;
    if (a_known != b_known) return a_known;
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
    return rank_less(a.ranks.front(), b.ranks.front());
  });
  // The largest class with frames sets the scale; several classes must exist to tell one apart.
  std::size_t known = 0, largest = 0;
  for (const auto& c : classes)
    if (c.source != StackSource::none) {
      ++known;
      largest = std::max(largest, c.ranks.size());
    }
  if (known < 2) return classes;
  for (auto& c : classes) {
    if (c.source == StackSource::none || c.ranks.size() >= largest) continue;
    c.suspect = c.ranks.size() == 1 || c.ranks.size() * kSuspectRatio <= largest;
  }
  return classes;
}

std::string compact_ranks(const std::vector<RankRef>& ranks, std::size_t max_bytes) {
  std::string out = "[";
  std::size_t i = 0, runs = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (ranks[i].rank >= 0 && j + 1 < ranks.size() && ranks[j + 1].node == ranks[i].node &&
           ranks[j + 1].rank == ranks[j].rank + 1)
      ++j;
    std::string run = ranks[i].node + ":" + (ranks[i].rank < 0 ? std::string("?") : std::to_string(ranks[i].rank));
    if (j > i) run += "-" + std::to_string(ranks[j].rank);
    if (max_bytes && runs > 0 && out.size() + run.size() + 16 > max_bytes) {
      std::size_t left = ranks.size() - i;
      out += ",+" + std::to_string(left) + " more";
      break;
    }
    out += (runs++ ? "," : "") + run;
    i = j + 1;
  }
  return out + "]";
}

std::string classes_text(const std::vector<StackClass>& classes, std::size_t frames_shown, std::size_t max_classes) {
  std::size_t total = 0;
  for (const auto& c : classes) total += c.ranks.size();
  std::string o = "stack classes: " + std::to_string(total) + " rank(s) in " + std::to_string(classes.size()) +
                  " class(es), largest first (ranks with the same stack form a class)\n";
  std::size_t n = 0;
  for (const auto& c : classes) {
    if (n++ == max_classes) {
      o += "  ... and " + std::to_string(classes.size() - max_classes) + " more class(es)\n";
      break;
    }
    o += "  " + std::to_string(c.ranks.size()) + " rank(s) " + compact_ranks(c.ranks, 400) + " " +
         std::string(source_name(c.source)) + (c.suspect ? "  <- SUSPECT" : "") + "\n";
    if (c.source == StackSource::none) {
      o += "      (no stack: " + c.why + ")\n";
      continue;
    }
    for (std::size_t f = 0; f < c.frames.size() && f < frames_shown; ++f) o += "      " + c.frames[f] + "\n";
    if (c.frames.size() > frames_shown) o += "      ... " + std::to_string(c.frames.size() - frames_shown) + " more\n";
  }
  return o;
}

}  // namespace gpudiag
