#pragma once
// This node as Slurm sees it, through `scontrol` run without a shell and with a
// deadline: a hung or failing scontrol is reported, never waited on forever.
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpudiag {

struct SlurmNodeState {
  std::string state;               // as scontrol prints it: "IDLE+DRAIN", "DOWN+NOT_RESPONDING"
  std::string base;                // "IDLE", "ALLOCATED", "MIXED", "DOWN", ...
  std::vector<std::string> flags;  // "DRAIN", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED", ...
  bool drain = false;              // DRAIN flag: drained or draining
  std::string reason;              // first line, without the trailing " [user@time]"
  bool has(std::string_view flag) const;
};

// One node of `scontrol show node` without a name (every node): what the drain
// breaker counts.
struct SlurmNodeRecord {
  std::string name;
  SlurmNodeState state;
  std::vector<std::string> partitions;  // Partitions=a,b; empty when it is in none
};

// Pure: parses `scontrol show node NAME` output field by field (see the .cpp for the
// layout). A field Slurm prints once that appears twice is an error, not a guess.
Result<SlurmNodeState> parse_scontrol_node(std::string_view text, const std::string& node);
// Pure: the same for every node. A record starts at a line that starts with
// "NodeName="; a node name that appears twice is an error, as a repeated field is.
Result<std::vector<SlurmNodeRecord>> parse_scontrol_nodes(std::string_view text);

class Scontrol {
 public:
  explicit Scontrol(double timeout_s) : timeout_s_(timeout_s) {}
  Result<SlurmNodeState> show(const std::string& node) const;
  // Every node, in one call (one RPC to slurmctld).
  Result<std::vector<SlurmNodeRecord>> show_all() const;
  // Errors are full messages naming the node and quoting scontrol.
  Result<bool> drain(const std::string& node, const std::string& reason) const;
  Result<bool> resume(const std::string& node) const;
  // Clears DRAIN only, never a DOWN (scontrol's State=UNDRAIN, Slurm >= 20.11).
  Result<bool> undrain(const std::string& node) const;

 private:
  Result<bool> update(const std::string& node, const std::vector<std::string>& args, const char* what) const;
  double timeout_s_;
};

}  // namespace gpudiag
