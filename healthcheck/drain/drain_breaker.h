#pragma once
// The drain breaker (ARCHITECTURE §4, README "The drain breaker"): a bug, a bad config or
// a shared outage (subnet manager, fabric manager) makes every node's check fail at
// once, and without a cap every node would drain itself. Before a node in service is
// drained, the nodes gpudiag has drained already are counted from Slurm's own table
// (every node judges from the same truth), and the drain is held back once a cap is
// reached. Everything here is pure: records and settings in, counts and verdicts out.
#include <string>
#include <vector>

#include "config/config.h"
#include "healthcheck/drain/slurm_node.h"

namespace gpudiag {

// The nodes gpudiag has drained within one scope (the cluster, or one partition),
// this node left out: the breaker asks whether one more fits.
struct BreakerScope {
  std::string partition;             // empty: the whole cluster
  int size = 0;                      // nodes in the scope, this one included
  std::vector<std::string> drained;  // drained by gpudiag, sorted, without this node
};

struct BreakerCounts {
  BreakerScope cluster;
  std::vector<BreakerScope> partitions;  // each partition this node is in
};

// A node counts when Slurm has it DRAIN (drained or draining, whatever its base
// state) with a reason that starts with the prefix.
bool counts_as_gpudiag_drain(const SlurmNodeState& node, const std::string& prefix);
BreakerCounts count_drains(const std::vector<SlurmNodeRecord>& nodes, const std::string& self,
                           const std::string& prefix);

// How many nodes of a scope gpudiag may have drained at once; nullopt: no cap.
// The share is rounded up, so a partition of any size can always lose one node.
std::optional<int> scope_limit(const BreakerScope& scope, const DrainSettings& settings);

struct BreakerVerdict {
  bool allow = true;
  // When held back: the cap that binds, its figures and the scope's drained nodes.
  std::string cap;  // "drain.max_nodes" or "drain.max_share of partition gpu"
  int count = 0;    // nodes gpudiag has drained in that scope, this one left out
  int limit = 0;
  std::vector<std::string> drained;
};

// Whether this node may be (or stay) drained: for every scope, the nodes gpudiag has
// drained there besides this one, plus this one, stay within the scope's limit. The
// same rule before the drain and in the re-count after it.
BreakerVerdict breaker_rule(const BreakerCounts& counts, const DrainSettings& settings);

// After a re-count found the cap exceeded and this node undid its drain: which try
// slot (1, 2, ...) it may retry in, or 0 for none. Nodes that collided agree on an
// order (names, sorted) without talking: the first `limit` of them retry one per slot,
// the rest are held back at once.
int retry_slot(const BreakerVerdict& over, const std::string& self);

// Why a node is held back, for its syslog line and its report: the cap, the count and
// how to release it ("held back by the drain breaker: ...").
std::string held_back_text(const std::string& node, const BreakerVerdict& v, const std::string& prefix);

}  // namespace gpudiag
