#include <fmt/format.h>

#include "healthcheck/formats.h"

namespace gpudiag {

std::string format_prometheus(const Report& r) {
  std::string out;
  out += "# HELP gpudiag_check_status Status of a gpudiag-health check: 0 ok, 1 warning, 2 critical, 3 unknown.\n";
  out += "# TYPE gpudiag_check_status gauge\n";
  for (const auto& c : r.checks)
    out += fmt::format("gpudiag_check_status{{check=\"{}\"}} {}\n", c.name, static_cast<int>(c.status));
  out += "# HELP gpudiag_check_duration_seconds Time a gpudiag-health check took.\n";
  out += "# TYPE gpudiag_check_duration_seconds gauge\n";
  for (const auto& c : r.checks)
    out += fmt::format("gpudiag_check_duration_seconds{{check=\"{}\"}} {:.6f}\n", c.name, c.duration_ms / 1000.0);
  out += "# HELP gpudiag_check_findings Findings of a check by status.\n";
  out += "# TYPE gpudiag_check_findings gauge\n";
  for (const auto& c : r.checks)
    for (Status s : {Status::warning, Status::critical, Status::unknown})
      out += fmt::format("gpudiag_check_findings{{check=\"{}\",status=\"{}\"}} {}\n", c.name, status_name(s),
                         c.count(s));
  out += "# HELP gpudiag_status Overall node status: 0 ok, 1 warning, 2 critical, 3 unknown.\n";
  out += "# TYPE gpudiag_status gauge\n";
  out += fmt::format("gpudiag_status {}\n", static_cast<int>(r.status));
  out += "# HELP gpudiag_duration_seconds Time the whole run took.\n";
  out += "# TYPE gpudiag_duration_seconds gauge\n";
  out += fmt::format("gpudiag_duration_seconds {:.6f}\n", r.duration_ms / 1000.0);
  return out;
}

}  // namespace gpudiag
