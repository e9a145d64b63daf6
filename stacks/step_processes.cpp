#include "stacks/step_processes.h"

#include <algorithm>
#include <map>
#include <set>

#include "util/run_command.h"

namespace gpudiag {
namespace {

bool digits(std::string_view s) {
  return !s.empty() && s.size() <= 12 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Digits that fit an int; anything else is nullopt (no exception: the text is Slurm's).
std::optional<int> small_number(std::string_view s) {
  if (s.empty() || s.size() > 9 || !digits(s)) return std::nullopt;
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

Result<StepId> parse_step_id(std::string_view text) {
  auto dot = text.find('.');
  StepId id;
  id.job = std::string(text.substr(0, dot));
  if (dot != std::string_view::npos) id.step = std::string(text.substr(dot + 1));
  if (!digits(id.job) || (id.step && !digits(*id.step)))
    return Result<StepId>::failure("gpudiag: '" + std::string(text) + "' is not a job id: use JOBID or JOBID.STEPID, e.g. 1234.0");
  return id;
}

std::optional<std::string> environ_value(std::string_view environ, std::string_view name) {
  std::size_t pos = 0;
  while (pos < environ.size()) {
    auto end = environ.find('\0', pos);
    std::string_view entry = environ.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=')
      return std::string(entry.substr(name.size() + 1));
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

Result<std::vector<ListedPid>> parse_listpids(std::string_view text) {
  std::vector<ListedPid> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    auto w = words(line);
    if (w.empty() || w[0] == "PID") continue;
    // A task with no process (not forked yet, or ended and reaped while scontrol asked
    // slurmstepd) is listed with pid -1: nothing to read, and no reason to fail the rest.
    if (w.size() == 5 && w[0] == "-1") continue;
    auto pid = w.size() == 5 ? small_number(w[0]) : std::nullopt;
    auto global_id = w.size() == 5 && w[4] != "-" ? small_number(w[4]) : std::optional<int>(-1);
    if (!pid || *pid == 0 || !global_id)
      return Result<std::vector<ListedPid>>::failure("scontrol listpids printed a line gpudiag cannot read: '" +
                                                     std::string(line.substr(0, 120)) + "'");
    ListedPid p;
    p.pid = static_cast<pid_t>(*pid);
    p.job = std::string(w[1]);
    p.step = std::string(w[2]);
    p.global_id = *global_id;
    out.push_back(p);
  }
  return out;
}

Result<std::vector<ListedPid>> list_job_pids(const std::string& job, double timeout_s) {
  // The whole job: asked for one step, scontrol fails on a node the step does not use.
  auto r = run_command({"scontrol", "listpids", job}, timeout_s);
  if (!r.ok()) return Result<std::vector<ListedPid>>::failure(describe_failure("scontrol listpids", r, timeout_s));
  return parse_listpids(r.out);
}

std::vector<StepTask> step_task_roots(const std::vector<ListedPid>& listed, const ProcTable& table, const StepId& id,
                                      const std::string& skip_step) {
  std::map<pid_t, const ListedPid*> members;
  for (const auto& p : listed) {
    if (p.job != id.job || p.step == skip_step || (id.step && p.step != *id.step)) continue;
    if (table.count(p.pid)) members[p.pid] = &p;
  }
  std::vector<StepTask> out;
  for (const auto& [pid, p] : members) {
    const ProcStat& st = table.at(pid);
    if (members.count(st.ppid)) continue;  // not topmost
    auto parent = table.find(st.ppid);
    bool stepd_fork = parent != table.end() && parent->second.comm == st.comm;
    if (!stepd_fork) {
      out.push_back({pid, p->global_id, p->step});
      continue;
    }
    for (const auto& [child, cst] : table)
      if (cst.ppid == pid && members.count(child) && cst.comm != kSpreadListenerName)  // not the program
        out.push_back({child, p->global_id, p->step});
  }
  std::sort(out.begin(), out.end(), [](const StepTask& a, const StepTask& b) {
    return a.step != b.step ? a.step < b.step : a.rank != b.rank ? a.rank < b.rank : a.pid < b.pid;
  });
  return out;
}

}  // namespace gpudiag
