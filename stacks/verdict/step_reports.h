#pragma once
// The I/O half of the step's merge: every node's hang report in the step's diag dir
// (hang_watchdog.h writes hang.<host>.txt, or hang.<host>.<random>.txt where that name
// was taken), read back with bounds, for srun's end-of-step verdict.
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "stacks/verdict/rank_stack.h"
#include "util/rank_cap.h"

namespace gpudiag {

// Bounds: a tampered or huge diag dir cannot make srun read or keep without end. A real
// node's report is tens of KiB (bench/stack_merge.py: 4,096 ranks in 24 MiB of reports).
constexpr std::size_t kMaxReportBytes = 16u << 20;   // per node's report
constexpr std::size_t kMaxStepBytes = 512u << 20;    // all reports together
constexpr std::size_t kMaxReports = 16384;           // nodes
constexpr std::size_t kMaxStepRanks = kMaxRanks;        // at most kMaxRankLineBytes each

// Pure: the node a hang report's file name stands for ("hang.n2.txt", "hang.n2.x1y2z3.txt"
// -> "n2"); "" for any other name. The one rule for those names.
std::string hang_report_node(std::string_view file_name);

struct StepReports {
  std::vector<RankStack> ranks;
  int nodes = 0;                      // reports read
  std::vector<std::string> problems;  // "file: why" for reports skipped
};

// Reads every hang report in the open dir `dir_fd` that is a regular file owned by `uid`
// (others are skipped and named in problems); each opened relative to the fd, without
// following links or blocking. The fd stays the caller's.
StepReports read_step_reports(int dir_fd, uid_t uid);
// The same by path (the CLI, on a dir the user names): opened once, never through a link.
StepReports read_step_reports(const std::string& dir, uid_t uid);

}  // namespace gpudiag
