#pragma once
// How an analysis is shown: a human report, JSON, and the one line srun prints at the
// end of a --diag step.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "nccllog/nccl_log_problems.h"

namespace gpudiag {

std::string format_nccl_report(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems);
nlohmann::json nccl_report_json(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems);
// Its text, newline-terminated. Log lines are raw bytes, often not UTF-8: those bytes
// become U+FFFD rather than an exception that would lose the whole report.
std::string nccl_report_json_text(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems);
// "gpudiag: NCCL 2.21.5, NET/IB on 16/16 ranks (mlx5_0..7, IB), no problems"
std::string nccl_summary_line(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems);
// "mlx5_0..7" for mlx5_0 ... mlx5_7; anything else listed.
std::string compress_names(std::vector<std::string> names);

}  // namespace gpudiag
