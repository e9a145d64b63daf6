#include <fmt/format.h>

#include "healthcheck/formats.h"

namespace gpudiag {

std::string format_nhc(const Report& r) {
  // Warnings keep the node in service, so NHC sees nothing for them.
  if (r.status == Status::ok || r.status == Status::warning) return "";
  const Finding* worst = r.most_severe();
  if (!worst) return fmt::format("gpudiag: node is {}\n", status_name(r.status));
  int others = -1;
  for (const auto& c : r.checks)
    for (const auto& f : c.findings) others += f.status == Status::critical || f.status == Status::unknown;
  std::string line = "gpudiag: " + worst->message;
  if (others > 0) line += fmt::format(" (+{} more)", others);
  // The line becomes a Slurm drain reason: one line, no control characters.
  for (char& ch : line)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  return line + "\n";
}

}  // namespace gpudiag
