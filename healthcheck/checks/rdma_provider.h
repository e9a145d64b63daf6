#pragma once
// Which RDMA provider drives a device (from the kernel driver bound to its PCI function),
// and the tools that name its faults. mlx5's are mlxlink/mlxconfig/ibstat; EFA has no
// cable or link to tune from the host (the driver always reports its port ACTIVE,
// LinkUp, link layer "Unknown"), so its fixes are the driver, the device and the instance.
#include <string>

#include "nodeinfo/ib_discovery.h"

namespace gpudiag {

enum class RdmaProvider { mlx5, efa, other };

// "mlx5_core" -> mlx5, "efa" -> efa; a device without a driver link is judged by its
// name (mlx5_*: mlx5, rdmap*/efa_*: efa), as older trees and tests have no link.
RdmaProvider rdma_provider(const IbHca& hca);
const char* provider_name(RdmaProvider p);  // "mlx5", "efa", "rdma"

// Fix texts for a port or device of this provider.
std::string fix_unreadable(RdmaProvider p, const std::string& hca);
std::string fix_link_down(RdmaProvider p, const std::string& hca);  // training, recovering
std::string fix_slow(RdmaProvider p, const std::string& hca);
std::string fix_link_layer(RdmaProvider p, const std::string& hca, int port, const std::string& want);
std::string fix_missing(RdmaProvider p);  // an expected device is not there

}  // namespace gpudiag
