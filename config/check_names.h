#pragma once
// The one list of gpudiag-health's checks: their names, in report order, and whether
// --quick (and the default run) includes them. The config validates `health.checks`
// against it, --checks and --quick derive from it, and the checker's table of functions
// must name exactly these (a unit test holds it to that). A new check starts here.
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

struct CheckName {
  std::string_view name;
  bool quick;  // needs no GPU initialisation: part of --quick and of the default run
};

inline constexpr CheckName kCheckNames[] = {
    {"ib", true}, {"acs", true}, {"iommu", true}, {"gpu", true}, {"p2p", false}, {"nccl", false},
    {"xid", true}, {"ibcounters", true},
    {"pcie", true}, {"gdr", true},
};

// Every name, in order; the quick ones; the names as "ib,acs,..." for messages.
const std::vector<std::string>& known_checks();
const std::vector<std::string>& quick_checks();
const std::string& known_checks_text();

}  // namespace gpudiag
