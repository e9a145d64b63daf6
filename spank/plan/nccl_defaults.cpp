#include "spank/plan/nccl_defaults.h"

#include "util/name_patterns.h"

namespace gpudiag {

std::string auto_ib_hca(const IbInventory& inv, const IbExpect& expect) {
  std::string list;
  for (const auto& hca : inv.hcas) {
    if (hca.name.find("bond") != std::string::npos || matches_any(expect.exclude, hca.name)) continue;
    bool up = false;
    for (const auto& p : hca.ports) up |= p.is_up() && p.link_layer && *p.link_layer == "InfiniBand";
    if (up) list += (list.empty() ? "=" : ",") + hca.name;
  }
  return list;
}

EnvList nccl_defaults(const PluginSettings& p, const IbInventory& inv, const IbExpect& expect) {
  EnvList out;
  for (const auto& [name, value] : p.nccl_env) {
    if (name == "NCCL_IB_HCA" && value == "auto") {
      std::string hcas = auto_ib_hca(inv, expect);
      if (!hcas.empty()) out.emplace_back(name, hcas);
    } else {
      out.emplace_back(name, value);
    }
  }
  return out;
}

}  // namespace gpudiag
