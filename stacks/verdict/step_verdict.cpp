#include "stacks/verdict/step_verdict.h"

#include <unistd.h>

#include "stacks/verdict/flight_recorder.h"
#include "stacks/verdict/stack_classes.h"
#include "stacks/verdict/step_reports.h"
#include "util/control_bytes.h"
#include "util/private_file.h"

namespace gpudiag {

VerdictInputs gather_verdict_inputs(int dir_fd, const std::string& diag_dir, uid_t owner) {
  StepReports reports = read_step_reports(dir_fd, owner);
  VerdictInputs in;
  in.nodes_reported = reports.nodes;
  in.diag_dir = diag_dir;
  in.classes = stack_classes(std::move(reports.ranks));
  if (reports.nodes == 0) return in;
  std::vector<RankRef> nodes;
  for (const auto& c : in.classes) nodes.insert(nodes.end(), c.ranks.begin(), c.ranks.end());
  auto dumps = read_flight_dumps(dir_fd, owner);
  std::string fr = dumps.empty() ? flight_absent_finding() : flight_finding(dumps, nodes);
  while (!fr.empty() && fr.back() == '\n') fr.pop_back();
  if (!fr.empty()) in.findings.push_back(fr);
  if (!reports.problems.empty())
    in.findings.push_back("gpudiag: hang reports skipped: " + reports.problems.front() +
                          (reports.problems.size() > 1 ? " (+" + std::to_string(reports.problems.size() - 1) + " more)"
                                                       : std::string()));
  return in;
}

VerdictInputs gather_verdict_inputs(const std::string& diag_dir, uid_t owner) {
  const int dfd = open_dir_fd(diag_dir.c_str());
  if (dfd < 0) {
    VerdictInputs in;
    in.diag_dir = diag_dir;
    return in;
  }
  VerdictInputs in = gather_verdict_inputs(dfd, diag_dir, owner);
  ::close(dfd);
  return in;
}

std::string hang_step_verdict(int dir_fd, const std::string& diag_dir, uid_t owner) {
  try {
    std::string out;
    for (const auto& line : hang_verdict(gather_verdict_inputs(dir_fd, diag_dir, owner))) out += line;
    // Frames are any process's bytes: they must not drive srun's terminal.
    return escape_control(out, true);
  } catch (...) {
    return "gpudiag: hang verdict: internal error; the hang reports are in " + escape_control(diag_dir) + "\n";
  }
}

std::string hang_step_verdict(const std::string& diag_dir, uid_t owner) {
  const int dfd = open_dir_fd(diag_dir.c_str());
  if (dfd < 0) return "";
  std::string out = hang_step_verdict(dfd, diag_dir, owner);
  ::close(dfd);
  return out;
}

}  // namespace gpudiag
