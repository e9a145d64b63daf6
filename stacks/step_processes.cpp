#include "stacks/step_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "nodeinfo/proc_tree.h"

namespace gpudiag {
namespace {

bool digits(std::string_view s) {
  return !s.empty() && s.size() <= 12 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string read_environ(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/environ";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[16384];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && out.size() < (1u << 20)) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
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

std::vector<StepTask> find_step_tasks(const StepId& id, const std::string& skip_step) {
  ProcTable table = snapshot_processes();
  std::map<pid_t, StepTask> members;
  for (const auto& [pid, st] : table) {
    std::string env = read_environ(pid);
    if (environ_value(env, "SLURM_JOB_ID") != id.job) continue;
    auto step = environ_value(env, "SLURM_STEP_ID").value_or("");
    if (step == skip_step || (id.step && step != *id.step)) continue;
    StepTask t;
    t.pid = pid;
    t.step = step;
    auto rank = environ_value(env, "SLURM_PROCID");
    t.rank = rank ? std::atoi(rank->c_str()) : -1;
    members[pid] = t;
  }
  // The topmost members: their parent is not one (slurmstepd is not).
  std::vector<StepTask> out;
  for (const auto& [pid, t] : members) {
    auto it = table.find(pid);
    if (it == table.end() || members.count(it->second.ppid)) continue;
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const StepTask& a, const StepTask& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace gpudiag
