#include "healthcheck/checks/bandwidth_rules.h"

#include "util/name_patterns.h"

namespace gpudiag {

const BandwidthRule* choose_bandwidth_rule(const std::vector<BandwidthRule>& rules, const std::string& model, int gpus) {
  const BandwidthRule* any_count = nullptr;
  for (const auto& r : rules) {
    if (!matches(r.model, model)) continue;
    if (r.gpus && *r.gpus == gpus) return &r;
    if (!r.gpus && !any_count) any_count = &r;
  }
  return any_count;
}

}  // namespace gpudiag
