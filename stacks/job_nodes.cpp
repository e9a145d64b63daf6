#include "stacks/job_nodes.h"

#include "util/run_command.h"

namespace gpudiag {

Result<int> parse_squeue_node_count(std::string_view text, const std::string& job) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text.empty())
    return Result<int>::failure("gpudiag: job " + job + " is not in Slurm's queue: is it still running? (squeue -j " +
                                job + ")");
  bool ok = text.size() <= 7 && text.find_first_not_of("0123456789") == std::string_view::npos;
  int nodes = 0;
  if (ok)
    for (char c : text) nodes = nodes * 10 + (c - '0');
  if (!ok || nodes < 1)
    return Result<int>::failure("gpudiag: cannot tell how many nodes job " + job + " has: squeue printed '" +
                                std::string(text.substr(0, 80)) + "'");
  return nodes;
}

Result<int> job_node_count(const std::string& job, double timeout_s) {
  auto r = run_command({"squeue", "--noheader", "--jobs=" + job, "--format=%D"}, timeout_s);
  if (!r.ok())
    return Result<int>::failure("gpudiag: cannot tell how many nodes job " + job + " has: " +
                                describe_failure("squeue", r, timeout_s));
  return parse_squeue_node_count(r.out, job);
}

}  // namespace gpudiag
