#include <fmt/format.h>

#include "healthcheck/report/formats.h"
#include "util/control_bytes.h"

namespace gpudiag {

std::string format_nhc(const Report& r) {
  // Warnings keep the node in service, so NHC sees nothing for them.
  if (r.status == Status::ok || r.status == Status::warning) return "";
  std::string line = "gpudiag: " + headline(r);
  // NHC hands the line to Slurm as a drain reason: one line, no control characters.
  return replace_control(line, ' ') + "\n";
}

}  // namespace gpudiag
