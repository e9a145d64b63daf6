#include "stacks/verdict/step_reports.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "util/control_bytes.h"
#include "util/private_file.h"

namespace gpudiag {

std::string hang_report_node(std::string_view n) {
  constexpr std::string_view pre = "hang.", suf = ".txt";
  if (n.size() <= pre.size() + suf.size() || n.substr(0, pre.size()) != pre || n.substr(n.size() - suf.size()) != suf)
    return "";
  std::string_view middle = n.substr(pre.size(), n.size() - pre.size() - suf.size());
  return std::string(middle.substr(0, middle.find('.')));
}

StepReports read_step_reports(int dfd, uid_t uid) {
  StepReports out;
  std::vector<std::string> names =
      dir_names(dfd, [](std::string_view n) { return !hang_report_node(n).empty(); }, kMaxReports);
  std::sort(names.begin(), names.end());
  std::size_t total = 0;
  for (const auto& name : names) {
    if (total >= kMaxStepBytes || out.ranks.size() >= kMaxStepRanks) {
      out.problems.push_back(escape_control(name) + " and the reports after it: not read, the merge's limit (" +
                             std::to_string(kMaxStepBytes >> 20) + " MiB, " + std::to_string(kMaxStepRanks) +
                             " ranks) was reached");
      break;
    }
    OwnedFile file = read_owned_file(dfd, name.c_str(), uid,
                                     std::min(kMaxReportBytes, kMaxStepBytes - total));
    if (!file.read) {
      out.problems.push_back(escape_control(name) + ": " + file.why);
      continue;
    }
    total += file.bytes.size();
    ++out.nodes;
    auto ranks = rank_stacks_in_report(file.bytes, kMaxStepRanks - out.ranks.size());
    for (auto& r : ranks) out.ranks.push_back(std::move(r));
  }
  return out;
}

StepReports read_step_reports(const std::string& dir, uid_t uid) {
  const int dfd = open_dir_fd(dir.c_str());
  if (dfd < 0) return {};
  StepReports out = read_step_reports(dfd, uid);
  ::close(dfd);
  return out;
}

}  // namespace gpudiag
