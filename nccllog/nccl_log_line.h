#pragma once
// One NCCL debug line, taken apart (ARCHITECTURE §6):
//   host:pid:tid [dev] NCCL INFO <msg>
//   host:pid:tid [dev] file.cc:123 NCCL WARN <msg>
//   host:pid:tid [dev] 1234.567890 func:123 NCCL TRACE <msg>
// Anything before host:pid:tid (a timestamp, our own [host:rank] tag) is skipped.
// Views point into the caller's line, so parsing allocates nothing.
#include <optional>
#include <string_view>

namespace gpudiag {

enum class NcclLevel { info, warn, trace, other };

struct NcclLine {
  std::string_view host, pid, tid, dev;
  NcclLevel level = NcclLevel::other;
  std::string_view where;  // "file.cc:123" on WARN, "func:123" on TRACE
  std::string_view msg;
};

std::optional<NcclLine> parse_nccl_line(std::string_view line);

}  // namespace gpudiag
