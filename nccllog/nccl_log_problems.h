#pragma once
// Known bad setups found in an analysed set of NCCL logs (ARCHITECTURE §6), each with what
// it means and the fix. Pure: facts about the nodes come in as arguments.
#include <set>
#include <string>
#include <vector>

#include "nccllog/nccl_log_analyzer.h"

namespace gpudiag {

enum class Severity { warning = 1, problem = 2 };

struct NcclProblem {
  Severity severity = Severity::problem;
  std::string kind;     // short id: socket-with-ib, ib-error-12, ...
  std::string message;  // what happened
  std::string fix;      // what it means and what to do
  std::vector<std::string> who;  // host:rank labels
};

// `hosts_with_active_ib`: hosts known to have an ACTIVE IB port (the local node's
// sysfs, when the analyzer runs there).
std::vector<NcclProblem> diagnose(const NcclLogAnalysis& a, const std::set<std::string>& hosts_with_active_ib);

// 0 clean, 1 warnings (NCCL WARN lines or warning-level findings), 2 problems,
// 3 unknown: no NCCL line was read at all, so nothing can be called clean.
constexpr int kNcclLogUnknown = 3;
bool nothing_read(const NcclLogAnalysis& a);
int nccl_log_exit_code(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems);

}  // namespace gpudiag
