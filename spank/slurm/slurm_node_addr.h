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

namespace gpudiag {

struct SlurmNodeAddr {
  std::string address;   // numeric (getnameinfo NI_NUMERICHOST); "" when Slurm has none
  std::string hostname;  // NodeHostname; "" when unknown
};

std::optional<SlurmNodeAddr> slurm_node_addr(const std::string& node_name);

}  // namespace gpudiag
