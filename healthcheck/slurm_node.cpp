#include "healthcheck/slurm_node.h"

#include <fmt/format.h>

#include "nodeinfo/run_command.h"

namespace gpudiag {

Result<SlurmNodeState> parse_scontrol_node(std::string_view text, const std::string& node) {
  auto fail = [&](const std::string& why) {
    return Result<SlurmNodeState>::failure(fmt::format("gpudiag: scontrol show node {}: {}", node, why));
  };
  if (text.find("NodeName=") == std::string_view::npos) return fail("no NodeName= in its output");
  SlurmNodeState st;
  auto state_at = text.find(" State=");
  if (state_at == std::string_view::npos) return fail("no State= in its output");
  auto v = text.substr(state_at + 7);
  st.state = std::string(v.substr(0, v.find_first_of(" \n")));
  st.drain = st.state.find("DRAIN") != std::string::npos;
  // Reason is the rest of its line: "Reason=text with spaces [user@2026-11-21T08:30:00]".
  auto reason_at = text.find("Reason=");
  if (reason_at != std::string_view::npos && (reason_at == 0 || text[reason_at - 1] == ' ' || text[reason_at - 1] == '\n')) {
    auto r = text.substr(reason_at + 7);
    std::string line(r.substr(0, r.find('\n')));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty() && line.back() == ']') {
      auto open = line.rfind(" [");
      if (open != std::string::npos && line.find('@', open) != std::string::npos) line.resize(open);
    }
    if (line != "(null)") st.reason = line;
  }
  return st;
}

Result<SlurmNodeState> Scontrol::show(const std::string& node) const {
  auto r = run_command({"scontrol", "show", "node", node}, timeout_s_);
  if (!r.ok()) return Result<SlurmNodeState>::failure("gpudiag: cannot read node " + node + " from Slurm: " +
                                                      describe_failure("scontrol", r, timeout_s_));
  return parse_scontrol_node(r.out, node);
}

Result<bool> Scontrol::update(const std::string& node, const std::vector<std::string>& args, const char* what) const {
  std::vector<std::string> argv = {"scontrol", "update", "NodeName=" + node};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_command(argv, timeout_s_);
  if (!r.ok())
    return Result<bool>::failure(fmt::format("gpudiag: cannot {} node {}: {}", what, node,
                                             describe_failure("scontrol", r, timeout_s_)));
  return true;
}

Result<bool> Scontrol::drain(const std::string& node, const std::string& reason) const {
  // One argv element, no shell: the reason reaches slurmctld exactly as built.
  return update(node, {"State=DRAIN", "Reason=" + reason}, "drain");
}

Result<bool> Scontrol::resume(const std::string& node) const { return update(node, {"State=RESUME"}, "resume"); }

}  // namespace gpudiag
