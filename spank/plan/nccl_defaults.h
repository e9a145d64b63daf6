#pragma once
// The site's NCCL defaults for this node, with NCCL_IB_HCA=auto resolved from sysfs.
#include "config/config.h"
#include "nodeinfo/ib_discovery.h"
#include "spank/plan/dist_env.h"

namespace gpudiag {

// "=mlx5_0,mlx5_1": HCAs with a port up, bonds and ib.exclude left out. The leading
// '=' makes NCCL match exact names (mlx5_1 would otherwise also match mlx5_10).
// Empty when there is none: then NCCL_IB_HCA is not set at all.
std::string auto_ib_hca(const IbInventory& inv, const IbExpect& expect);
EnvList nccl_defaults(const PluginSettings& p, const IbInventory& inv, const IbExpect& expect);

}  // namespace gpudiag
