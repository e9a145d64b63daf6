#include "nodeinfo/active_ib_host.h"

#include "nodeinfo/ib_discovery.h"
#include "util/this_host.h"

namespace gpudiag {

std::set<std::string> local_hosts_with_active_ib(const std::string& fs_root) {
  std::set<std::string> out;
  IbInventory ib = discover_ib(RootedFs(fs_root));
  bool active = false;
  for (const auto& h : ib.hcas)
    for (const auto& p : h.ports) active |= p.is_up();
  if (!active) return out;
  const std::string name = hostname();
  out.insert(short_name(name));
  out.insert(name);
  return out;
}

}  // namespace gpudiag
