#include "nodeinfo/proc_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <functional>

namespace gpudiag {

std::optional<ProcStat> parse_proc_stat(std::string_view line) {
  auto open = line.find('(');
  auto close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  ProcStat s;
  auto [p, ec] = std::from_chars(line.data(), line.data() + open, s.pid);
  if (ec != std::errc() || s.pid <= 0) return std::nullopt;
  s.comm = std::string(line.substr(open + 1, close - open - 1));
  // Fields after comm: 3 state, 4 ppid, ..., 14 utime, 15 stime.
  std::vector<std::string_view> f;
  std::string_view rest = line.substr(close + 1);
  while (!rest.empty()) {
    auto start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    auto end = rest.find_first_of(" \n");
    f.push_back(rest.substr(0, end));
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  }
  if (f.size() < 13 || f[0].size() != 1) return std::nullopt;
  s.state = f[0][0];
  auto num = [](std::string_view v, auto& out) {
    auto [q, e] = std::from_chars(v.data(), v.data() + v.size(), out);
    return e == std::errc() && q == v.data() + v.size();
  };
  unsigned long long ut = 0, st = 0;
  if (!num(f[1], s.ppid) || !num(f[11], ut) || !num(f[12], st)) return std::nullopt;
  s.cpu_ticks = ut + st;
  return s;
}

ProcTable snapshot_processes(const std::string& proc) {
  ProcTable t;
  DIR* d = ::opendir(proc.c_str());
  if (!d) return t;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::string path = proc + "/" + e->d_name + "/stat";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    if (auto s = parse_proc_stat(std::string_view(buf, static_cast<std::size_t>(n)))) t[s->pid] = *s;
  }
  ::closedir(d);
  return t;
}

std::vector<pid_t> process_tree(const ProcTable& table, pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& [pid, s] : table) children.emplace(s.ppid, pid);
  std::vector<pid_t> out;
  if (!table.count(root)) return out;
  out.push_back(root);
  for (std::size_t i = 0; i < out.size() && out.size() < 100000; ++i) {
    auto [a, b] = children.equal_range(out[i]);
    for (auto it = a; it != b; ++it) out.push_back(it->second);
  }
  return out;
}

double tree_cpu_seconds(const ProcTable& table, const std::vector<pid_t>& pids) {
  static const long hz = ::sysconf(_SC_CLK_TCK);
  unsigned long long ticks = 0;
  for (pid_t p : pids) {
    auto it = table.find(p);
    if (it != table.end()) ticks += it->second.cpu_ticks;
  }
  return static_cast<double>(ticks) / static_cast<double>(hz > 0 ? hz : 100);
}

}  // namespace gpudiag
