#pragma once
// Whether this host could have used InfiniBand: the NCCL log analyzer asks it of the
// ranks that ran here, to tell "Socket chosen over working IB" from "no IB at all".
#include <set>
#include <string>

namespace gpudiag {

// This host's names (short, and as the kernel has it) when its sysfs under fs_root shows
// an ACTIVE, LinkUp IB port; empty otherwise.
std::set<std::string> local_hosts_with_active_ib(const std::string& fs_root);

}  // namespace gpudiag
