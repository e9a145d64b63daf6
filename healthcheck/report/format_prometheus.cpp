#include <fmt/format.h>

#include <map>

#include "healthcheck/report/formats.h"

namespace gpudiag {
namespace {

// Label values are escaped as the exposition format asks: backslash, quote, newline.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Every check's per-device values, one HELP/TYPE block per metric name (the format
// wants a name's samples together), in the order names first appear.
std::string device_metrics(const Report& r) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Metric*>> by_name;
  for (const auto& c : r.checks)
    for (const auto& m : c.metrics) {
      auto& v = by_name[m.name];
      if (v.empty()) order.push_back(m.name);
      v.push_back(&m);
    }
  std::string out;
  for (const auto& name : order) {
    const auto& v = by_name[name];
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, v.front()->help, name);
    for (const Metric* m : v) {
      std::string labels;
      for (const auto& [k, val] : m->labels) labels += fmt::format("{}{}=\"{}\"", labels.empty() ? "" : ",", k, label_value(val));
      out += labels.empty() ? fmt::format("{} {}\n", name, m->value)
                            : fmt::format("{}{{{}}} {}\n", name, labels, m->value);
    }
  }
  return out;
}

}  // namespace

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
  if (r.finished_at_s > 0) {
    out += "# HELP gpudiag_last_run_timestamp_seconds When this gpudiag-health run ended (Unix time).\n";
    out += "# TYPE gpudiag_last_run_timestamp_seconds gauge\n";
    out += fmt::format("gpudiag_last_run_timestamp_seconds {:.3f}\n", r.finished_at_s);
  }
  if (r.slurm) {
    // Alert on this: a node that is CRITICAL yet in service, because the drain breaker
    // held it back (its cap reached, or it could not count).
    out += "# HELP gpudiag_drain_held_back 1 when this node is CRITICAL but the drain breaker held its drain back.\n";
    out += "# TYPE gpudiag_drain_held_back gauge\n";
    out += fmt::format("gpudiag_drain_held_back {}\n", r.slurm->action == "held_back" ? 1 : 0);
    if (r.slurm->limit > 0) {
      out += "# HELP gpudiag_drain_breaker_drained Nodes drained by gpudiag in the scope of the cap that held this "
             "node back, this node left out.\n";
      out += "# TYPE gpudiag_drain_breaker_drained gauge\n";
      out += fmt::format("gpudiag_drain_breaker_drained{{cap=\"{}\"}} {}\n", label_value(r.slurm->cap), r.slurm->count);
      out += "# HELP gpudiag_drain_breaker_limit The cap that held this node back.\n";
      out += "# TYPE gpudiag_drain_breaker_limit gauge\n";
      out += fmt::format("gpudiag_drain_breaker_limit{{cap=\"{}\"}} {}\n", label_value(r.slurm->cap), r.slurm->limit);
    }
  }
  out += device_metrics(r);
  return out;
}

}  // namespace gpudiag
