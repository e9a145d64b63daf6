#pragma once
// Processes from /proc: who is whose child, their state and CPU time. The hang
// watchdog uses it to find every process of a task and to see whether they compute.
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

struct ProcStat {
  pid_t pid = 0;
  std::string comm;
  char state = '?';
  pid_t ppid = 0;
  unsigned long long cpu_ticks = 0;  // utime + stime
};

// One /proc/PID/stat line. comm may hold spaces and ')', so it runs to the last ')'.
std::optional<ProcStat> parse_proc_stat(std::string_view line);

using ProcTable = std::map<pid_t, ProcStat>;
// Every process we can read under `proc` (default /proc); ones that vanish are skipped.
ProcTable snapshot_processes(const std::string& proc = "/proc");
// `root` and all its descendants, parents before children.
std::vector<pid_t> process_tree(const ProcTable& table, pid_t root);
// Total CPU seconds of those processes.
double tree_cpu_seconds(const ProcTable& table, const std::vector<pid_t>& pids);

}  // namespace gpudiag
