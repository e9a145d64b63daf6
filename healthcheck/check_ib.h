#pragma once
// The ib check: every port under /sys/class/infiniband against the config's
// expectations (HCAs, count, rate, link layer). Unlike NHC's check_hw_ib it also
// checks link_layer, so a port flipped to Ethernet is caught.
#include "healthcheck/check_context.h"
#include "healthcheck/report.h"
#include <optional>
#include <string>
#include <vector>

#include "nodeinfo/ib_discovery.h"

namespace gpudiag {

// Pure: the findings for an inventory read elsewhere. `verbs` lists the devices
// libibverbs can open (nullopt: not known, e.g. under --fs-root).
CheckResult evaluate_ib(const IbInventory& inv, const IbExpect& expect,
                        const std::optional<std::vector<std::string>>& verbs = std::nullopt);
CheckResult run_ib_check(const CheckContext& ctx);

}  // namespace gpudiag
