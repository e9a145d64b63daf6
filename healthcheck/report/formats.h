#pragma once
// The four report formats of gpudiag-health (ARCHITECTURE §8).
#include <nlohmann/json.hpp>

#include <string>

#include "healthcheck/report/report.h"

namespace gpudiag {

// A compact table per check; problems with their hints; with `verbose`, every finding.
std::string format_human(const Report& r, bool verbose, bool color);
nlohmann::ordered_json report_to_json(const Report& r);
// The JSON text, newline-terminated. Bytes that are not UTF-8 (a garbage sysfs string
// quoted in a finding) become U+FFFD instead of throwing away the whole report.
std::string format_json(const Report& r);
// Nothing when the node may stay in service; else one line, the most severe finding.
std::string format_nhc(const Report& r);
// node_exporter textfile collector format.
std::string format_prometheus(const Report& r);

}  // namespace gpudiag
