#include <fmt/format.h>

#include "healthcheck/formats.h"

namespace gpudiag {
namespace {

std::string paint(Status s, const std::string& text, bool color) {
  if (!color) return text;
  const char* code = s == Status::ok ? "32" : s == Status::warning ? "33" : s == Status::critical ? "31" : "35";
  return fmt::format("\033[{}m{}\033[0m", code, text);
}

}  // namespace

std::string format_human(const Report& r, bool verbose, bool color) {
  std::string out = fmt::format("gpudiag-health on {}: {} ({:.0f} ms)\n", r.node,
                                paint(r.status, status_label(r.status), color), r.duration_ms);
  for (const auto& c : r.checks) {
    // Pad before painting: escape codes would throw the columns off.
    out += fmt::format("  {:<6} {} {}\n", c.name, paint(c.status, fmt::format("{:<8}", status_label(c.status)), color),
                       c.summary);
    for (const auto& f : c.findings) {
      if (f.status == Status::ok && !verbose) continue;
      out += fmt::format("      {} {}\n", paint(f.status, fmt::format("{:<8}", status_label(f.status)), color), f.message);
      if (!f.hint.empty() && f.status != Status::ok) out += fmt::format("               fix: {}\n", f.hint);
    }
    if (verbose && !c.text.empty()) {
      std::size_t start = 0;
      while (start < c.text.size()) {
        std::size_t nl = c.text.find('\n', start);
        if (nl == std::string::npos) nl = c.text.size();
        out += "        " + c.text.substr(start, nl - start) + "\n";
        start = nl + 1;
      }
    }
  }
  return out;
}

}  // namespace gpudiag
