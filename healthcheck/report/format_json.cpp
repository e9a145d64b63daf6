#include "healthcheck/report/formats.h"

namespace gpudiag {

nlohmann::ordered_json report_to_json(const Report& r) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const auto& c : r.checks) {
    nlohmann::ordered_json findings = nlohmann::ordered_json::array();
    for (const auto& f : c.findings) {
      nlohmann::ordered_json jf = {{"subject", f.subject}, {"status", status_name(f.status)}, {"message", f.message}};
      if (!f.hint.empty()) jf["hint"] = f.hint;
      findings.push_back(std::move(jf));
    }
    nlohmann::ordered_json jc = {{"name", c.name},
                         {"status", status_name(c.status)},
                         {"summary", c.summary},
                         {"duration_ms", c.duration_ms},
                         {"findings", std::move(findings)}};
    if (!c.details.is_null()) jc["details"] = nlohmann::ordered_json::parse(c.details.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    checks.push_back(std::move(jc));
  }
  nlohmann::ordered_json out = {{"node", r.node},
                                 {"status", status_name(r.status)},
                                 {"duration_ms", r.duration_ms},
                                 {"checks", std::move(checks)}};
  if (r.slurm) {
    // The status stays the checks' own: a node the breaker held back is still critical.
    nlohmann::ordered_json s = {{"action", r.slurm->action}, {"explanation", r.slurm->explanation}};
    if (r.slurm->limit > 0)
      s["breaker"] = {{"cap", r.slurm->cap}, {"drained", r.slurm->count}, {"limit", r.slurm->limit}};
    out["slurm"] = std::move(s);
  }
  return out;
}

std::string format_json(const Report& r) {
  return report_to_json(r).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace gpudiag
