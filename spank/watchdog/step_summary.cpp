#include "spank/watchdog/step_summary.h"

#include "nccllog/nccl_log_problems.h"
#include "nccllog/nccl_log_reader.h"
#include "nccllog/nccl_log_report.h"
#include "util/control_bytes.h"
#include "util/this_host.h"

namespace gpudiag {
namespace {

constexpr std::uint64_t kSummaryBytes = 256ull << 20;

}  // namespace

std::string nccl_dir_unseen(const std::string& dir) {
  return escape_control("gpudiag: the diag dir " + dir + " cannot be seen from " + short_hostname() +
           " (where srun runs): the step made none (see above), or it is on the nodes only: there, run `gpudiag "
           "nccl-log " + dir + "`\n", true);
}

std::string nccl_step_summary(int dir_fd, const std::string& dir, uid_t owner) {
  if (!has_nccl_logs(dir_fd))
    return escape_control("gpudiag: no NCCL logs in " + dir + " (the step did not use NCCL, or it is not visible from " +
                              short_hostname() + ")\n",
                          true);
  NcclLogAnalyzer analyzer;
  ReadLimits limits;
  limits.max_total_bytes = kSummaryBytes;
  read_nccl_logs_in_dir(analyzer, dir_fd, dir, owner, limits);
  NcclLogAnalysis a = analyzer.finish();
  // srun often runs on a login node without IB: its sysfs says nothing about the
  // ranks' hosts, so the judgement rests on what the logs say.
  auto problems = diagnose(a, {});
  std::string out = nccl_summary_line(a, problems) + "\n";
  if (a.truncated) out += "gpudiag: (summary from the first 256 MiB of logs)\n";
  out += "gpudiag: details: gpudiag nccl-log " + dir + "\n";
  // Log text is any process's bytes (issue 21 A8): it must not drive srun's terminal.
  return escape_control(out, true);
}

}  // namespace gpudiag
