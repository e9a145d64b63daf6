#pragma once
// When gpudiag-health may drain or resume a node (DESIGN §2, NHC's conventions):
// drain only on CRITICAL, never overwrite another reason, resume only what we drained.
#include <string>

#include "healthcheck/report.h"
#include "healthcheck/slurm_node.h"

namespace gpudiag {

// Slurm keeps long reasons, but `sinfo -R` and humans do not; NHC's are one line too.
constexpr std::size_t kMaxDrainReason = 256;

enum class NodeAction { none, drain, resume };

struct DrainDecision {
  NodeAction action = NodeAction::none;
  std::string reason;       // for drain
  std::string explanation;  // what was decided and why, for people
};

// "<prefix> <most severe finding> (+N more)", one line, no control bytes, bounded.
std::string drain_reason(const Report& report, const std::string& prefix);
bool drained_by_us(const SlurmNodeState& node, const std::string& prefix);
DrainDecision decide_drain(const Report& report, const SlurmNodeState& node, bool want_drain, bool want_resume,
                           const std::string& prefix);

}  // namespace gpudiag
