#pragma once
// When gpudiag-health may drain or resume a node (ARCHITECTURE §8, NHC's conventions):
// drain only on CRITICAL, resume only on OK, and touch a node only while it is in
// service or drained by gpudiag itself. Whatever an admin or Slurm did (DOWN, FAIL,
// a drain with another reason, maintenance, a pending reboot, power saving) stays.
#include <string>

#include "healthcheck/drain/slurm_node.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

// Slurm keeps long reasons, but `sinfo -R` and humans do not; NHC's are one line too.
constexpr std::size_t kMaxDrainReason = 256;

enum class NodeAction { none, drain, resume };

struct DrainDecision {
  NodeAction action = NodeAction::none;
  std::string reason;       // for drain
  std::string explanation;  // what was decided and why, for people
};

enum class NodeStanding {
  in_service,     // gpudiag may drain it
  drained_by_us,  // gpudiag may resume it (or drain it again with a new reason)
  not_ours,       // someone else took it out of service, or Slurm is busy with it: hands off
};
struct Standing {
  NodeStanding kind = NodeStanding::not_ours;
  std::string why;  // for not_ours: "it is DOWN with reason 'admin: replacing PSU'"
};
Standing node_standing(const SlurmNodeState& node, const std::string& prefix);

// "<prefix> <most severe finding> (+N more)", one line, no control bytes, bounded.
std::string drain_reason(const Report& report, const std::string& prefix);
bool drained_by_us(const SlurmNodeState& node, const std::string& prefix);
DrainDecision decide_drain(const Report& report, const SlurmNodeState& node, bool want_drain, bool want_resume,
                           const std::string& prefix);

}  // namespace gpudiag
