#include "fabric/pair_plan.h"

#include <algorithm>
#include <set>

namespace gpudiag::fabric {
namespace {

Pair ordered(int x, int y) { return x < y ? Pair{x, y} : Pair{y, x}; }

bool has(const std::vector<Pair>& v, const Pair& p) { return std::find(v.begin(), v.end(), p) != v.end(); }

}  // namespace

std::vector<Round> first_rounds(int nodes) {
  std::vector<Round> rounds;
  if (nodes < 2) return rounds;
  if (nodes == 2) return {{Pair{0, 1}}};
  // Ring edges i -- i+1: even edges, then odd ones; with an odd ring the closing edge
  // (n-1 -- 0) shares node 0 with the first edge and n-1 with the last odd one.
  Round even, odd, last;
  for (int i = 0; i < nodes; ++i) {
    const Pair p = ordered(i, (i + 1) % nodes);
    if (nodes % 2 == 1 && i == nodes - 1) last.push_back(p);
    else (i % 2 == 0 ? even : odd).push_back(p);
  }
  for (Round* r : {&even, &odd, &last})
    if (!r->empty()) rounds.push_back(*r);
  return rounds;
}

std::vector<Round> pack_rounds(const std::vector<Pair>& pairs) {
  std::vector<Round> rounds;
  std::vector<std::set<int>> busy;
  for (const Pair& p : pairs) {
    std::size_t r = 0;
    while (r < rounds.size() && (busy[r].count(p.a) || busy[r].count(p.b))) ++r;
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back();
    }
    rounds[r].push_back(p);
    busy[r].insert(p.a);
    busy[r].insert(p.b);
  }
  return rounds;
}

std::vector<Pair> retest_pairs(int nodes, const std::vector<Pair>& tested, const std::vector<Pair>& slow) {
  std::vector<int> pairs_of(nodes, 0), slow_of(nodes, 0);
  for (const Pair& p : tested) {
    if (p.a < 0 || p.b >= nodes || p.a >= p.b) continue;
    ++pairs_of[p.a];
    ++pairs_of[p.b];
  }
  for (const Pair& p : slow) {
    if (p.a < 0 || p.b >= nodes || p.a >= p.b) continue;
    ++slow_of[p.a];
    ++slow_of[p.b];
  }
  std::vector<int> good, suspect;
  for (int i = 0; i < nodes; ++i) {
    if (pairs_of[i] > 0 && slow_of[i] == pairs_of[i]) suspect.push_back(i);
    else if (pairs_of[i] > 0) good.push_back(i);  // fast with someone
  }
  std::vector<Pair> out;
  for (int s : suspect) {
    bool met_new = false;
    for (std::size_t k = 0; k < good.size() && !met_new; ++k) {
      const Pair p = ordered(s, good[(static_cast<std::size_t>(s) + k) % good.size()]);
      if (!has(tested, p) && !has(out, p)) {
        out.push_back(p);
        met_new = true;
      }
    }
    // It met every good node already (3 nodes): its slow pairs once more, so that one
    // busy moment on a shared machine does not name a healthy node.
    if (!met_new && !good.empty())
      for (const Pair& p : slow)
        if ((p.a == s || p.b == s) && !has(out, p)) out.push_back(p);
  }
  for (const Pair& p : slow) {
    const bool a_fine = std::find(suspect.begin(), suspect.end(), p.a) == suspect.end();
    const bool b_fine = std::find(suspect.begin(), suspect.end(), p.b) == suspect.end();
    // Nobody is fast with anyone (2 nodes, or all slow): the pair itself once more.
    if (((a_fine && b_fine) || good.empty()) && !has(out, p)) out.push_back(p);
  }
  return out;
}

}  // namespace gpudiag::fabric
