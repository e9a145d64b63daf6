#include "stacks/verdict/step_verdict.h"

#include "stacks/verdict/flight_recorder.h"
#include "stacks/verdict/stack_classes.h"
#include "stacks/verdict/step_reports.h"
#include "util/control_bytes.h"

namespace gpudiag {

VerdictInputs gather_verdict_inputs(const std::string& diag_dir, uid_t owner) {
  StepReports reports = read_step_reports(diag_dir, owner);
  VerdictInputs in;
  in.nodes_reported = reports.nodes;
  in.diag_dir = diag_dir;
  in.classes = stack_classes(std::move(reports.ranks));
  if (reports.nodes == 0) return in;
  std::vector<RankRef> nodes;
  for (const auto& c : in.classes) nodes.insert(nodes.end(), c.ranks.begin(), c.ranks.end());
  auto dumps = read_flight_dumps(diag_dir, owner);
  std::string fr = dumps.empty() ? flight_absent_finding() : flight_finding(dumps, nodes);
  while (!fr.empty() && fr.back() == '\n') fr.pop_back();
  if (!fr.empty()) in.findings.push_back(fr);
  if (!reports.problems.empty())
    in.findings.push_back("gpudiag: hang reports skipped: " + reports.problems.front() +
                          (reports.problems.size() > 1 ? " (+" + std::to_string(reports.problems.size() - 1) + " more)"
                                                       : std::string()));
  return in;
}

std::string hang_step_verdict(const std::string& diag_dir, uid_t owner) {
  try {
    std::string out;
    for (const auto& line : hang_verdict(gather_verdict_inputs(diag_dir, owner))) out += line;
    // Frames are any process's bytes: they must not drive srun's terminal.
    return escape_control(out, true);
  } catch (...) {
    return "gpudiag: hang verdict: internal error; the hang reports are in " + escape_control(diag_dir) + "\n";
  }
}

}  // namespace gpudiag
