#pragma once
// The ib check: every port under /sys/class/infiniband against the config's
// expectations (HCAs, count, and per role: rate, link layer). Unlike NHC's check_hw_ib it
// also checks link_layer, so a port flipped to Ethernet is caught. Any RDMA provider
// (mlx5, EFA, ...): each is judged by what its driver reports, with its own tools named.
#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"
#include <optional>
#include <string>
#include <vector>

#include "healthcheck/checks/port_roles.h"
#include "nodeinfo/ib_discovery.h"

namespace gpudiag {

// Pure: the findings for an inventory read elsewhere. `verbs` lists the devices
// libibverbs can open (nullopt: not known, e.g. under --fs-root). `roles` says what each
// port is for (port_roles.h); null: told from the inventory alone (no PCI placement).
CheckResult evaluate_ib(const IbInventory& inv, const IbExpect& expect,
                        const std::optional<std::vector<std::string>>& verbs = std::nullopt,
                        const PortRoles* roles = nullptr);
CheckResult run_ib_check(const CheckContext& ctx);

}  // namespace gpudiag
