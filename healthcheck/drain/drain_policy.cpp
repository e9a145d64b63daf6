#include "healthcheck/drain/drain_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "util/control_bytes.h"

namespace gpudiag {
namespace {

// Base states of a node that takes or runs jobs ("COMPLETING" was a base state before 2.x).
constexpr std::array<std::string_view, 5> kInService = {"IDLE", "ALLOCATED", "ALLOC", "MIXED", "COMPLETING"};
// Flags that do not take a node out of service. Anything else (FAIL, MAINTENANCE,
// REBOOT_*, POWER*, NOT_RESPONDING, INVALID_REG, and flags of future releases) does,
// or means Slurm is busy with the node: gpudiag then leaves it alone.
constexpr std::array<std::string_view, 6> kHarmlessFlags = {"COMPLETING", "RESERVED", "PLANNED",
                                                            "CLOUD",      "DYNAMIC_NORM", "PERFCTRS"};

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& set, std::string_view s) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

bool has_prefix(const std::string& reason, const std::string& prefix) {
  return !prefix.empty() && reason.compare(0, prefix.size(), prefix) == 0;
}

std::string describe(const SlurmNodeState& node) {
  return node.reason.empty() ? fmt::format("it is {}", node.state)
                             : fmt::format("it is {} with reason '{}'", node.state, node.reason);
}

}  // namespace

Standing node_standing(const SlurmNodeState& node, const std::string& prefix) {
  bool base_ok = one_of(kInService, node.base);
  bool flags_ok = std::all_of(node.flags.begin(), node.flags.end(),
                              [](const std::string& f) { return f == "DRAIN" || one_of(kHarmlessFlags, f); });
  if (!base_ok || !flags_ok) return {NodeStanding::not_ours, describe(node) + ", not in service"};
  if (node.drain) {
    if (has_prefix(node.reason, prefix)) return {NodeStanding::drained_by_us, ""};
    return {NodeStanding::not_ours, fmt::format("drained with reason '{}', not by gpudiag", node.reason)};
  }
  // In service and not drained: Slurm schedules jobs here, so it is in service whatever
  // its Reason says. 24.11 keeps the reason of a drain after `State=RESUME` (seen on
  // 24.11.5: State=IDLE, Reason=admin: ...), so a stale reason must not hold the node.
  return {NodeStanding::in_service, ""};
}

std::string drain_reason(const Report& report, const std::string& prefix) {
  std::string line = replace_control(prefix + " " + headline(report), ' ');
  if (line.size() > kMaxDrainReason) line = line.substr(0, kMaxDrainReason - 3) + "...";
  return line;
}

bool drained_by_us(const SlurmNodeState& node, const std::string& prefix) {
  return node_standing(node, prefix).kind == NodeStanding::drained_by_us;
}

DrainDecision decide_drain(const Report& report, const SlurmNodeState& node, bool want_drain, bool want_resume,
                           const std::string& prefix) {
  DrainDecision d;
  Standing s = node_standing(node, prefix);
  const std::string hands_off = "left alone (gpudiag changes a node only while it is in service or drained by gpudiag)";
  if (want_drain && report.status == Status::critical) {
    if (s.kind == NodeStanding::not_ours) {
      d.explanation = s.why + ": " + hands_off;
      return d;
    }
    d.reason = drain_reason(report, prefix);
    if (s.kind == NodeStanding::drained_by_us && node.reason == d.reason) {
      d.explanation = "already drained by gpudiag for the same reason";
    } else {
      d.action = NodeAction::drain;
      d.explanation = "drained: " + d.reason;
    }
    return d;
  }
  if (want_resume && report.status == Status::ok) {
    if (s.kind == NodeStanding::in_service) {
      d.explanation = "not drained: nothing to resume";
    } else if (s.kind == NodeStanding::not_ours) {
      d.explanation = s.why + ": " + hands_off;
    } else {
      d.action = NodeAction::resume;
      d.explanation = "resumed: it was drained by gpudiag and is healthy now";
    }
    return d;
  }
  if (want_drain && report.status != Status::critical)
    d.explanation = fmt::format("status {}: no drain (only CRITICAL drains)", status_name(report.status));
  else if (want_resume)
    d.explanation = fmt::format("status {}: no resume (only OK resumes)", status_name(report.status));
  return d;
}

}  // namespace gpudiag
