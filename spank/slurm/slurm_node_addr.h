#pragma once
// A node's address as Slurm itself reaches it, from the node table that slurmstepd
// already holds (slurm.conf's NodeAddr/NodeHostname, and for cloud or dynamic nodes
// what slurmctld sent with the launch): no RPC, no DNS of our own. The functions are
// libslurm's internal slurm_conf_get_addr/_hostname, looked up at run time (dlsym in
// the process that loaded us), so a Slurm without them gives nullopt, never a failed
// plugin load. Call it in slurmstepd before the tasks fork (user_init): the table's
// lock is a mutex that a forked child must not take.
#include <optional>
#include <string>

#include "spank/plan/node_addr.h"

namespace gpudiag {

std::optional<SlurmNodeAddr> slurm_node_addr(const std::string& node_name);

}  // namespace gpudiag
