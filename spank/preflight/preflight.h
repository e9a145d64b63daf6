#pragma once
// The node preflight: before the user program starts, what an unprivileged task can
// check in milliseconds, each problem a message that names the node, the problem and
// the fix. evaluate_preflight is pure; gather_preflight reads the node.
#include <sys/resource.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "nodeinfo/ib_discovery.h"

namespace gpudiag {

struct PreflightFacts {
  std::string host;
  IbInventory ib;
  IbExpect ib_expect;
  std::string shm_path;
  std::optional<unsigned long long> shm_bytes;  // nullopt: statvfs failed
  std::string shm_error;
  unsigned long long shm_min = 0;
  bool check_memlock = true;
  rlim_t memlock = RLIM_INFINITY;
  int gpus_requested = 0;   // SLURM_GPUS_ON_NODE; 0: none asked for
  int gpus_visible = -1;    // entries of CUDA_VISIBLE_DEVICES; -1: unset
  int gpus_on_pci = 0;
  std::string socket_ifname;             // NCCL_SOCKET_IFNAME as the task will see it
  std::vector<std::string> interfaces;   // under /sys/class/net
};

std::vector<std::string> evaluate_preflight(const PreflightFacts& f);

// Reads sysfs under s.fs_root, statvfs(s.shm_path), the memlock limit and the task's
// variables (passed in, since a SPANK task reads them through spank_getenv).
PreflightFacts gather_preflight(const PreflightSettings& s, const IbExpect& ib, const std::string& host,
                                const std::optional<std::string>& gpus_on_node,
                                const std::optional<std::string>& cuda_visible_devices,
                                const std::optional<std::string>& socket_ifname);

}  // namespace gpudiag
