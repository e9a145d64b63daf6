#include "spank/stack_report.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "nodeinfo/proc_tree.h"
#include "nodeinfo/run_command.h"

namespace gpudiag {
namespace {

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty() || dir[0] != '/') continue;  // never a relative PATH entry
    std::string full = dir + "/" + name;
    struct stat st;
    if (::stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

std::string read_small(const std::string& path, std::size_t max = 64 * 1024) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::string out(max, '\0');
  f.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<std::size_t>(f.gcount()));
  return out;
}

std::string cmdline(pid_t pid) {
  std::string raw = read_small("/proc/" + std::to_string(pid) + "/cmdline", 4096);
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

std::string indent(const std::string& text) {
  std::string out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out += "    " + line + "\n";
  return out;
}

void run_tool(std::ostringstream& o, const std::string& label, const std::vector<std::string>& argv, double timeout,
              bool& got) {
  CommandResult r = run_command(argv, timeout, 256 * 1024);
  if (!r.out.empty()) {
    o << "  " << label << ":\n" << indent(r.out);
    got = got || r.ok();
  }
  if (!r.ok()) o << "  " << label << ": " << describe_failure(argv[0], r, timeout) << "\n";
}

// Per thread: wchan, the syscall it sits in, and the kernel stack where readable.
void proc_stacks(std::ostringstream& o, pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(base.c_str());
  if (!d) return;
  std::vector<std::string> tids;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') tids.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  o << "  /proc (threads):\n";
  for (const auto& tid : tids) {
    const std::string t = base + "/" + tid;
    std::string comm = read_small(t + "/comm", 64);
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    std::string syscall = read_small(t + "/syscall", 256);
    if (!syscall.empty() && syscall.back() == '\n') syscall.pop_back();
    o << "    thread " << tid << " (" << comm << ") wchan " << read_small(t + "/wchan", 128) << " syscall "
      << syscall.substr(0, syscall.find(' ')) << "\n";
    std::string kstack = read_small(t + "/stack", 16 * 1024);
    if (!kstack.empty()) o << indent(indent(kstack));
  }
}

}  // namespace

StackTools find_stack_tools() {
  return {find_on_path("py-spy"), find_on_path("eu-stack"), find_on_path("gdb")};
}

std::string stack_report(const std::string& header, const std::vector<TaskRoot>& tasks, const StackTools& tools,
                         double tool_timeout_s) {
  std::ostringstream o;
  o << header << "\n";
  o << "tools: py-spy " << (tools.py_spy.empty() ? "not found" : tools.py_spy) << ", eu-stack "
    << (tools.eu_stack.empty() ? "not found" : tools.eu_stack) << ", gdb " << (tools.gdb.empty() ? "not found" : tools.gdb)
    << "\n";
  ProcTable table = snapshot_processes();
  for (const auto& task : tasks) {
    auto pids = process_tree(table, task.pid);
    o << "\n== task " << (task.rank >= 0 ? "rank " + std::to_string(task.rank) : std::string("?")) << ": program pid "
      << task.pid << ", " << pids.size() << " process(es)\n";
    if (pids.empty()) o << "  (gone)\n";
    for (pid_t pid : pids) {
      const ProcStat& s = table.at(pid);
      o << "\n-- pid " << pid << " ppid " << s.ppid << " state " << s.state << " (" << s.comm << ") wchan "
        << read_small("/proc/" + std::to_string(pid) + "/wchan", 128) << "\n   cmdline: " << cmdline(pid) << "\n";
      bool got = false;
      const std::string p = std::to_string(pid);
      if (!tools.py_spy.empty()) run_tool(o, "py-spy", {tools.py_spy, "dump", "--pid", p}, tool_timeout_s, got);
      bool native = false;
      if (!tools.eu_stack.empty()) run_tool(o, "eu-stack", {tools.eu_stack, "-p", p}, tool_timeout_s, native);
      else if (!tools.gdb.empty())
        run_tool(o, "gdb", {tools.gdb, "-batch", "-nx", "-p", p, "-ex", "thread apply all bt"}, tool_timeout_s, native);
      if (!got && !native) proc_stacks(o, pid);
    }
  }
  return o.str();
}

}  // namespace gpudiag
