#include "fabric/pair_verdict.h"

#include <algorithm>
#include <map>

namespace gpudiag::fabric {
namespace {

std::optional<double> best(std::optional<double> have, std::optional<double> more) {
  if (!have) return more;
  if (!more) return have;
  return std::max(*have, *more);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The pair's weaker direction, when both were measured.
std::optional<double> weaker(const PairFigure& p) {
  if (!p.ab_gbps || !p.ba_gbps) return std::nullopt;
  return std::min(*p.ab_gbps, *p.ba_gbps);
}

}  // namespace

PairJudgement judge_pairs(int nodes, const std::vector<Measurement>& measured, double slow_fraction, double min_gbps) {
  PairJudgement j;
  std::map<std::pair<int, int>, PairFigure> by_pair;
  for (const Measurement& m : measured) {
    if (m.reach || m.from == m.to || m.from < 0 || m.to < 0 || m.from >= nodes || m.to >= nodes) continue;
    const Pair p = m.from < m.to ? Pair{m.from, m.to} : Pair{m.to, m.from};
    PairFigure& f = by_pair[{p.a, p.b}];
    f.pair = p;
    auto& way = m.from == p.a ? f.ab_gbps : f.ba_gbps;
    way = best(way, m.gbps);
  }
  std::vector<std::optional<double>> node_best(nodes);
  for (auto& [key, f] : by_pair) {
    auto w = weaker(f);
    if (!w) continue;
    node_best[f.pair.a] = best(node_best[f.pair.a], w);
    node_best[f.pair.b] = best(node_best[f.pair.b], w);
  }
  std::vector<double> bests;
  for (const auto& b : node_best)
    if (b) bests.push_back(*b);
  j.reference_gbps = median(bests);
  j.threshold_gbps = std::max(min_gbps, slow_fraction * j.reference_gbps);
  std::vector<int> pairs_of(nodes, 0), slow_of(nodes, 0);
  for (auto& [key, f] : by_pair) {
    auto w = weaker(f);
    if (!w) continue;  // a direction failed: that is reported as unreachable, not slow
    f.slow = *w < j.threshold_gbps;
    ++pairs_of[f.pair.a];
    ++pairs_of[f.pair.b];
    if (f.slow) {
      j.slow.push_back(f.pair);
      ++slow_of[f.pair.a];
      ++slow_of[f.pair.b];
    }
  }
  auto fast_somewhere = [&](int n) { return pairs_of[n] > slow_of[n]; };
  for (int n = 0; n < nodes; ++n) {
    if (pairs_of[n] == 0 || slow_of[n] < pairs_of[n]) continue;
    bool partner_fine = false;  // else the partner may be the bad one
    for (const Pair& p : j.slow)
      if (p.a == n || p.b == n) partner_fine |= fast_somewhere(p.a == n ? p.b : p.a);
    if (partner_fine) j.bad_nodes.push_back(n);
  }
  auto is_bad = [&](int n) { return std::find(j.bad_nodes.begin(), j.bad_nodes.end(), n) != j.bad_nodes.end(); };
  for (const Pair& p : j.slow) {
    if (is_bad(p.a) || is_bad(p.b)) continue;
    if (fast_somewhere(p.a) && fast_somewhere(p.b)) j.bad_links.push_back(p);
    else j.unsure.push_back(p);
  }
  for (auto& [key, f] : by_pair) j.pairs.push_back(f);
  return j;
}

}  // namespace gpudiag::fabric
