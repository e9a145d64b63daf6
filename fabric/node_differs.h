#pragma once
// The node that differs (issue 32): what NCCL and torch will meet on each node and in
// each task, compared across the step. Pure: the tasks' hellos in, findings out.
#include <string>
#include <vector>

#include "fabric/fabric_wire.h"

namespace gpudiag::fabric {

struct Finding {
  std::string kind;     // unreachable, slow_node, slow_link, slow_pair, differs, no_match, layout
  bool fatal = false;   // fails the step under fabric.action=fail
  std::string subject;  // the node, the pair (n1-n2) or the variable
  std::string message;  // one line, no "gpudiag:" prefix
};

// Whether a task's variable is compared at all (NCCL_*, GLOO_*, TORCH_*, CUDA_*), and
// which of those differ by design: CUDA_VISIBLE_DEVICES is per task, and the interface
// and HCA lists gpudiag derives per node follow that node's hardware.
bool compared_env(const std::string& name);

// A value that differs across nodes or ranks, named with who has which
// ("NCCL_IB_HCA=mlx5_0 on n3 only (user-set), mlx5_0,mlx5_1 elsewhere"); a difference in
// a variable the user (or a site config) set is fatal, one gpudiag derived per node is
// not. Node facts (driver, kernel, rdma-core) that differ are named too, not fatal.
std::vector<Finding> find_differences(const std::vector<TaskHello>& tasks);

// A user-set interface or HCA list (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_IB_HCA)
// that matches nothing on a node is fatal: NCCL or gloo fails there at init.
std::vector<Finding> find_lists_matching_nothing(const std::vector<TaskHello>& tasks);

// NCCL's list syntax: comma-separated prefixes, `=` for exact names, `^` to exclude
// (an exclusion always leaves something to match), `:port` after an HCA.
bool nccl_list_matches_any(const std::string& value, const std::vector<std::string>& names);
// Whether an NCCL_IB_HCA-style list selects port `port` (0: any) of device `name`.
bool nccl_list_selects(const std::string& value, const std::string& name, int port);

}  // namespace gpudiag::fabric
