#include <fmt/format.h>

#include <algorithm>

#include "healthcheck/report/formats.h"

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
  // Three columns: the check's name as wide as the longest one ("ibcounters"), the status,
  // the text. A finding's status sits under its check's, and "fix:" under its text.
  std::size_t name_width = 0;
  for (const auto& c : r.checks) name_width = std::max(name_width, c.name.size());
  const std::string finding_indent(2 + name_width + 1, ' ');
  const std::string text_indent(finding_indent.size() + 8 + 1, ' ');
  for (const auto& c : r.checks) {
    // Pad before painting: escape codes would throw the columns off.
    out += fmt::format("  {:<{}} {} {}\n", c.name, name_width,
                       paint(c.status, fmt::format("{:<8}", status_label(c.status)), color), c.summary);
    for (const auto& f : c.findings) {
      if (f.status == Status::ok && !verbose) continue;
      out += finding_indent + paint(f.status, fmt::format("{:<8}", status_label(f.status)), color) + " " +
             f.message + "\n";
      if (!f.hint.empty() && f.status != Status::ok) out += text_indent + "fix: " + f.hint + "\n";
    }
    if (verbose && !c.text.empty()) {
      std::size_t start = 0;
      while (start < c.text.size()) {
        std::size_t nl = c.text.find('\n', start);
        if (nl == std::string::npos) nl = c.text.size();
        out += text_indent + c.text.substr(start, nl - start) + "\n";
        start = nl + 1;
      }
    }
  }
  return out;
}

}  // namespace gpudiag
