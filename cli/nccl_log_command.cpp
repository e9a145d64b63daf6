#include "cli/nccl_log_command.h"

#include <cstdio>
#include <iostream>

#include "nccllog/nccl_log_reader.h"
#include "nccllog/nccl_log_report.h"
#include "util/control_bytes.h"
#include "util/duration.h"
#include "nodeinfo/active_ib_host.h"
#include "util/text_lists.h"

namespace gpudiag {

CLI::App* add_nccl_log_command(CLI::App& app, NcclLogCommand& cmd) {
  auto* sub = app.add_subcommand("nccl-log", "explain what NCCL did, from NCCL_DEBUG logs (files or directories)");
  sub->add_option("paths", cmd.paths, "log files, or directories holding nccl* / *.log files (a --diag dir)")
      ->required();
  sub->add_flag("--json", cmd.json, "print JSON instead of the report");
  sub->add_option("--fs-root", cmd.fs_root, "read this host's IB ports under DIR (to spot Socket chosen over IB)");
  sub->add_option("--max-bytes", cmd.max_bytes, "stop after reading this much, e.g. 2G (default: everything)");
  return sub;
}

int run_nccl_log_command(const NcclLogCommand& cmd) {
  ReadLimits limits;
  if (!cmd.max_bytes.empty()) {
    auto v = parse_size(cmd.max_bytes);
    if (!v || *v == 0) {
      std::cerr << "gpudiag: nccl-log: --max-bytes '" << cmd.max_bytes << "' is not a size such as 512M or 2G\n";
      return 3;
    }
    limits.max_total_bytes = *v;
  }
  NcclLogAnalyzer analyzer;
  read_nccl_logs(analyzer, cmd.paths, limits);
  NcclLogAnalysis a = analyzer.finish();
  auto problems = diagnose(a, local_hosts_with_active_ib(cmd.fs_root));
  if (cmd.json) std::cout << nccl_report_json_text(a, problems);
  // Log text is any process's bytes: it must not drive the reader's terminal.
  else std::cout << escape_control(format_nccl_report(a, problems), true);
  std::cout.flush();
  if (nothing_read(a)) {
    for (const auto& e : a.read_errors) std::cerr << "gpudiag: nccl-log: cannot read " << e << "\n";
    if (a.files.empty())
      std::cerr << "gpudiag: nccl-log: no log file could be read in " << join(cmd.paths)
                << " (a directory contributes files named nccl* or *.log): give the NCCL_DEBUG_FILE outputs or a "
                   "--diag dir\n";
    else
      std::cerr << "gpudiag: nccl-log: read " << a.files.size() << " file(s), " << a.bytes
                << " bytes, and not one NCCL line: run the job with NCCL_DEBUG=INFO (srun --diag sets it) and give "
                   "the files it writes\n";
  }
  return nccl_log_exit_code(a, problems);
}

}  // namespace gpudiag
