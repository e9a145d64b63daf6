#include "nccllog/nccl_log_report.h"

#include <fmt/format.h>

#include "util/control_bytes.h"
#include "util/text_lists.h"

#include <algorithm>
#include <map>
#include <set>

namespace gpudiag {
namespace {

std::string init_state(const NcclProcess& p) {
  const CommInfo* w = p.world();
  if (!w) return "-";
  return w->complete ? "COMPLETE" : w->started ? "STARTED" : "-";
}

template <class Map>
std::string counts(const Map& m) {
  std::vector<std::string> parts;
  for (const auto& [k, n] : m) parts.push_back(fmt::format("{} x{}", k, n));
  return parts.empty() ? "-" : join(parts);
}

std::string net_label(const std::string& network) {
  return network == "IB" || network == "Socket" ? "NET/" + network : network;
}

std::string who_text(const std::vector<std::string>& who, std::size_t max = 6) {
  if (who.empty()) return "";
  std::vector<std::string> head(who.begin(), who.begin() + std::min(max, who.size()));
  std::string s = join(head);
  if (who.size() > max) s += fmt::format(" and {} more", who.size() - max);
  return s;
}

}  // namespace

std::string compress_names(std::vector<std::string> names) {
  std::map<std::string, std::vector<long>> numbered;
  std::vector<std::string> plain;
  for (const auto& n : names) {
    std::size_t d = n.size();
    while (d > 0 && std::isdigit(static_cast<unsigned char>(n[d - 1]))) --d;
    if (d == n.size() || d == 0 || n.size() - d > 6) plain.push_back(n);
    else numbered[n.substr(0, d)].push_back(std::stol(n.substr(d)));
  }
  std::vector<std::string> parts;
  for (auto& [prefix, nums] : numbered) {
    std::sort(nums.begin(), nums.end());
    nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
    bool run = nums.size() > 2 && nums.back() - nums.front() + 1 == static_cast<long>(nums.size());
    if (run) parts.push_back(fmt::format("{}{}..{}", prefix, nums.front(), nums.back()));
    else
      for (long x : nums) parts.push_back(prefix + std::to_string(x));
  }
  std::sort(plain.begin(), plain.end());
  plain.erase(std::unique(plain.begin(), plain.end()), plain.end());
  parts.insert(parts.end(), plain.begin(), plain.end());
  return join(parts);
}

std::string format_nccl_report(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems) {
  std::string out = fmt::format("NCCL logs: {} process(es) in {} file(s), {} bytes, {} lines ({} from NCCL){}\n",
                                a.processes.size(), a.files.size(), a.bytes, a.lines, a.nccl_lines,
                                a.truncated ? "; stopped early at the byte limit" : "");
  for (const auto& e : a.read_errors) out += "  cannot read " + e + "\n";
  if (a.process_lines_dropped)
    out += fmt::format("  {} lines of processes beyond the first {} not analysed (the cap on processes)\n",
                       a.process_lines_dropped, kMaxProcesses);
  if (!a.processes.empty()) {
    out += fmt::format("\n{:<16} {:>5} {:>8} {:<9} {:<10} {:<30} {:<8} {:<9} {}\n", "host:rank", "ranks", "pid", "NCCL",
                       "network", "devices", "OOB", "init", "channels");
    for (const auto& p : a.processes) {
      const CommInfo* w = p.world();
      std::vector<std::string> devs = p.ib_devices.empty() ? p.socket_devices : p.ib_devices;
      std::string net = p.network.empty() ? "-" : p.network;
      if (!p.plugin.empty() && p.plugin != "internal") net += "(" + p.plugin + ")";
      out += fmt::format("{:<16} {:>5} {:>8} {:<9} {:<10} {:<30} {:<8} {:<9} {}\n", p.label(),
                         w ? std::to_string(w->nranks) : "-", p.pid, p.version.empty() ? "-" : p.version, net,
                         devs.empty() ? "-" : join(devs, " "), p.oob.empty() ? "-" : p.oob, init_state(p),
                         counts(p.transports));
    }
    std::map<std::string, std::uint64_t> colls;
    for (const auto& p : a.processes)
      for (const auto& [k, n] : p.collectives) colls[k] += n;
    if (!colls.empty()) out += "\ncollectives (all ranks): " + counts(colls) + "\n";
  }
  if (!a.warnings.empty()) {
    out += "\nNCCL WARN lines, grouped:\n";
    for (const auto& w : a.warnings)
      out += fmt::format("  {:>6}x  {}\n          on {}\n", w.count, w.text,
                         who_text(std::vector<std::string>(w.who.begin(), w.who.end())));
    if (a.warn_groups_dropped) out += fmt::format("  ({} more WARN lines in other groups)\n", a.warn_groups_dropped);
  }
  if (!problems.empty()) {
    out += "\nproblems:\n";
    for (const auto& p : problems) {
      out += fmt::format("  {:<8} {}{}\n", p.severity == Severity::problem ? "PROBLEM" : "WARNING", p.message,
                         p.who.empty() ? "" : " (" + who_text(p.who) + ")");
      out += fmt::format("           fix: {}\n", p.fix);
    }
  }
  int code = nccl_log_exit_code(a, problems);
  if (code == kNcclLogUnknown)
    out += fmt::format("\nresult: unknown ({})\n", a.files.empty() ? "no log file could be read" : "no NCCL line in what was read");
  else
    out += fmt::format("\nresult: {}\n", code == 0 ? "clean" : code == 1 ? "warnings" : "problems found");
  return out;
}

nlohmann::json nccl_report_json(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems) {
  using nlohmann::json;
  json procs = json::array();
  for (const auto& p : a.processes) {
    const CommInfo* w = p.world();
    procs.push_back({{"host", p.host},
                     {"pid", p.pid},
                     {"rank", w ? json(w->rank) : json(nullptr)},
                     {"nranks", w ? json(w->nranks) : json(nullptr)},
                     {"label", p.label()},
                     {"source", p.source},
                     {"version", p.version},
                     {"network", p.network},
                     {"plugin", p.plugin},
                     {"oob", p.oob},
                     {"ib_devices", p.ib_devices},
                     {"socket_devices", p.socket_devices},
                     {"transports", p.transports},
                     {"collectives", p.collectives},
                     {"init", init_state(p)},
                     {"warnings", p.warnings}});
  }
  json warns = json::array();
  for (const auto& w : a.warnings) warns.push_back({{"text", w.text}, {"count", w.count}, {"who", w.who}});
  json probs = json::array();
  for (const auto& p : problems)
    probs.push_back({{"severity", p.severity == Severity::problem ? "problem" : "warning"},
                     {"kind", p.kind},
                     {"message", p.message},
                     {"fix", p.fix},
                     {"who", p.who}});
  int code = nccl_log_exit_code(a, problems);
  const char* status = code == 0 ? "clean" : code == 1 ? "warnings" : code == 2 ? "problems" : "unknown";
  return {{"status", status},
          {"files", a.files},
          {"bytes", a.bytes},
          {"lines", a.lines},
          {"nccl_lines", a.nccl_lines},
          {"truncated", a.truncated},
          {"process_lines_dropped", a.process_lines_dropped},
          {"warn_lines_dropped", a.warn_groups_dropped},
          {"read_errors", a.read_errors},
          {"processes", procs},
          {"warnings", warns},
          {"problems", probs}};
}

namespace {

// The caps an analysis hit, for srun's one line: a summary from part of the logs says so.
std::string caps_hit_text(const NcclLogAnalysis& a) {
  std::vector<std::string> caps;
  if (a.process_lines_dropped)
    caps.push_back(fmt::format("{} processes kept, {} lines of others not read", kMaxProcesses, a.process_lines_dropped));
  if (a.warn_groups_dropped)
    caps.push_back(fmt::format("{} WARN texts kept, {} lines of others not grouped", kMaxWarnGroups, a.warn_groups_dropped));
  return caps.empty() ? "" : " (caps hit: " + join(caps, "; ") + ")";
}

}  // namespace

std::string nccl_summary_line(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems) {
  if (a.processes.empty()) return "gpudiag: no NCCL log lines (the step may not have used NCCL)";
  std::set<std::string> versions;
  std::map<std::string, int> nets;
  std::vector<std::string> ib_names, sock_names;
  std::set<std::string> layers;
  for (const auto& p : a.processes) {
    if (!p.version.empty()) versions.insert(p.version);
    nets[p.network.empty() ? "no network" : net_label(p.network)]++;
    for (const auto& d : p.ib_devices) {
      ib_names.push_back(d.substr(0, d.find(':')));
      auto slash = d.find('/');
      if (slash != std::string::npos) layers.insert(d.substr(slash + 1));
    }
    for (const auto& d : p.socket_devices) sock_names.push_back(d);
  }
  std::string line = "gpudiag: NCCL " + (versions.empty() ? std::string("(version not logged)")
                                                            : join(std::vector<std::string>(versions.begin(), versions.end()), "/"));
  const int n = static_cast<int>(a.processes.size());
  for (const auto& [net, count] : nets) {
    line += fmt::format(", {} on {}/{} ranks", net, count, n);
    if (net == "NET/IB" && !ib_names.empty())
      line += " (" + compress_names(ib_names) + ", " + join(std::vector<std::string>(layers.begin(), layers.end()), "/") + ")";
    if (net == "NET/Socket" && !sock_names.empty()) line += " (" + compress_names(sock_names) + ")";
  }
  std::vector<std::string> parts;
  int worst = 0;
  for (const auto& p : problems) {
    worst = std::max(worst, static_cast<int>(p.severity));
    parts.push_back(p.message + (p.who.empty() ? "" : " on " + who_text(p.who, 4)));
  }
  if (parts.empty()) line += a.warnings.empty() ? ", no problems" : fmt::format(", {} NCCL warning(s)", a.warnings.size());
  else line += fmt::format(", {} {}: {}", parts.size(), worst == 2 ? "problem(s)" : "warning(s)", join(parts, "; "));
  return line + caps_hit_text(a);
}

std::string nccl_report_json_text(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems) {
  // Log text is any process's bytes: DEL and C1 too must not reach the reader's terminal.
  return escape_control_in_json(
             nccl_report_json(a, problems).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) +
         "\n";
}

}  // namespace gpudiag
