#include "healthcheck/drain/drain_breaker.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "util/control_bytes.h"

namespace gpudiag {
namespace {

// A held-back line names a few of the drained nodes, not 400 of them.
constexpr std::size_t kNamesShown = 5;

std::string names_text(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kNamesShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kNamesShown) out += fmt::format(" +{} more", names.size() - kNamesShown);
  return replace_control(out, '?');
}

}  // namespace

bool counts_as_gpudiag_drain(const SlurmNodeState& node, const std::string& prefix) {
  return node.drain && !prefix.empty() && node.reason.compare(0, prefix.size(), prefix) == 0;
}

BreakerCounts count_drains(const std::vector<SlurmNodeRecord>& nodes, const std::string& self,
                           const std::string& prefix) {
  BreakerCounts c;
  std::vector<std::string> mine;
  for (const auto& n : nodes)
    if (n.name == self) mine = n.partitions;
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  std::map<std::string, BreakerScope> parts;
  for (const auto& p : mine) parts[p].partition = p;
  for (const auto& n : nodes) {
    const bool counted = n.name != self && counts_as_gpudiag_drain(n.state, prefix);
    ++c.cluster.size;
    if (counted) c.cluster.drained.push_back(n.name);
    std::vector<std::string> seen;  // a partition named twice on one node counts it once
    for (const auto& p : n.partitions) {
      auto it = parts.find(p);
      if (it == parts.end() || std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
      seen.push_back(p);
      ++it->second.size;
      if (counted) it->second.drained.push_back(n.name);
    }
  }
  std::sort(c.cluster.drained.begin(), c.cluster.drained.end());
  for (auto& [name, scope] : parts) {
    std::sort(scope.drained.begin(), scope.drained.end());
    c.partitions.push_back(std::move(scope));
  }
  return c;
}

std::optional<int> scope_limit(const BreakerScope& scope, const DrainSettings& settings) {
  if (scope.partition.empty()) return settings.max_nodes;
  if (!settings.max_share_pct) return std::nullopt;
  // Whole numbers, no floating point at the boundary: ceil(pct * size / 100).
  long long limit = (static_cast<long long>(*settings.max_share_pct) * scope.size + 99) / 100;
  return static_cast<int>(std::max(1LL, limit));
}

BreakerVerdict breaker_rule(const BreakerCounts& counts, const DrainSettings& settings) {
  BreakerVerdict v;
  auto judge = [&](const BreakerScope& scope) {
    auto limit = scope_limit(scope, settings);
    if (!limit) return true;
    const int count = static_cast<int>(scope.drained.size());
    if (count + 1 <= *limit) return true;
    v.allow = false;
    v.cap = scope.partition.empty()
                ? std::string("drain.max_nodes")
                : fmt::format("drain.max_share ({}%) of partition {} ({} nodes)", *settings.max_share_pct,
                              replace_control(scope.partition, '?'), scope.size);
    v.count = count;
    v.limit = *limit;
    v.drained = scope.drained;
    return false;
  };
  if (!judge(counts.cluster)) return v;
  for (const auto& p : counts.partitions)
    if (!judge(p)) return v;
  return v;
}

int retry_slot(const BreakerVerdict& over, const std::string& self) {
  if (over.allow) return 0;
  auto order = over.drained;
  if (std::find(order.begin(), order.end(), self) == order.end()) order.push_back(self);
  std::sort(order.begin(), order.end());
  const auto rank = static_cast<int>(std::find(order.begin(), order.end(), self) - order.begin());
  return rank < over.limit ? rank + 1 : 0;
}

std::string held_back_text(const std::string& node, const BreakerVerdict& v, const std::string& prefix) {
  const std::string n = replace_control(node, '?');
  return fmt::format(
      "held back by the drain breaker: {} {} drained by gpudiag ({}) reach {} = {}; "
      "to release it, resume the drained nodes once fixed (gpudiag-health --resume on each, or scontrol update "
      "NodeName=NODE State=RESUME), or raise {} in gpudiag.yaml; to drain {} anyway: gpudiag-health --drain --force "
      "on {} (reason prefix '{}')",
      v.count, v.count == 1 ? "node" : "nodes", names_text(v.drained), v.cap, v.limit,
      v.cap.rfind("drain.max_share", 0) == 0 ? "drain.max_share" : "drain.max_nodes", n, n,
      replace_control(prefix, '?'));
}

}  // namespace gpudiag
