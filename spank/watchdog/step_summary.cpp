#include "spank/watchdog/step_summary.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "nccllog/nccl_log_problems.h"
#include "nccllog/nccl_log_reader.h"
#include "nccllog/nccl_log_report.h"
#include "util/control_bytes.h"
#include "util/this_host.h"

namespace gpudiag {
namespace {

constexpr std::uint64_t kSummaryBytes = 256ull << 20;

bool has_nccl_logs(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, "nccl.", 5) == 0) found = true;
  ::closedir(d);
  return found;
}

}  // namespace

std::string nccl_step_summary(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "gpudiag: the diag dir " + dir + " cannot be seen from " + short_hostname() +
           " (where srun runs): the step made none (see above), or it is on the nodes only: there, run `gpudiag "
           "nccl-log " + dir + "`\n";
  if (!has_nccl_logs(dir))
    return "gpudiag: no NCCL logs in " + dir + " (the step did not use NCCL, or it is not visible from " +
           short_hostname() + ")\n";
  NcclLogAnalyzer analyzer;
  ReadLimits limits;
  limits.max_total_bytes = kSummaryBytes;
  read_nccl_logs(analyzer, {dir}, limits);
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
