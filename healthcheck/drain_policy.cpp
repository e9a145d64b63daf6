#include "healthcheck/drain_policy.h"

#include <fmt/format.h>

namespace gpudiag {

std::string drain_reason(const Report& report, const std::string& prefix) {
  std::string line = prefix + " " + headline(report);
  for (char& ch : line)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  if (line.size() > kMaxDrainReason) line = line.substr(0, kMaxDrainReason - 3) + "...";
  return line;
}

bool drained_by_us(const SlurmNodeState& node, const std::string& prefix) {
  return node.drain && node.reason.compare(0, prefix.size(), prefix) == 0;
}

DrainDecision decide_drain(const Report& report, const SlurmNodeState& node, bool want_drain, bool want_resume,
                           const std::string& prefix) {
  DrainDecision d;
  if (want_drain && report.status == Status::critical) {
    if (node.drain && !drained_by_us(node, prefix)) {
      d.explanation = fmt::format("already drained with reason '{}': kept it", node.reason);
      return d;
    }
    d.action = NodeAction::drain;
    d.reason = drain_reason(report, prefix);
    if (node.drain && node.reason == d.reason) {
      d.action = NodeAction::none;
      d.explanation = "already drained by gpudiag for the same reason";
    } else {
      d.explanation = "drained: " + d.reason;
    }
    return d;
  }
  if (want_resume && report.status == Status::ok) {
    if (!node.drain) {
      d.explanation = "not drained: nothing to resume";
    } else if (!drained_by_us(node, prefix)) {
      d.explanation = fmt::format("drained with reason '{}', not by gpudiag: left drained", node.reason);
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
