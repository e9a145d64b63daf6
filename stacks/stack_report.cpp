#include "stacks/stack_report.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "nodeinfo/proc_tree.h"
#include "stacks/pyframes/python_stacks.h"
#include "util/run_command.h"
#include "util/spawn_child.h"

namespace gpudiag {
namespace {

using Clock = std::chrono::steady_clock;

// Enough to look at a node's ranks and their helpers at once; more would only make
// the tools compete for the node's cores.
constexpr std::size_t kWorkers = 8;
// What a worker needs at least to start on another process.
constexpr double kMinStart = 0.2;

// /proc files only; O_NONBLOCK because a name under /proc/PID can be anything once
// the process is gone and the pid reused.
std::string read_small(const std::string& path, std::size_t max = 64 * 1024) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out(max, '\0');
  std::size_t got = 0;
  while (got < max) {
    ssize_t n = ::read(fd, out.data() + got, max - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

std::string one_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return escape_control(s);
}

std::string cmdline(pid_t pid) {
  std::string raw = read_small("/proc/" + std::to_string(pid) + "/cmdline", 4096);
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return escape_control(raw);
}

std::string indent(const std::string& text) {
  std::string out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out += "    " + line + "\n";
  return out;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", s);
  return buf;
}

void run_tool(std::ostringstream& o, const std::string& label, const std::vector<std::string>& argv, double timeout,
              bool& got) {
  CommandResult r = run_command(argv, timeout, 256 * 1024);
  if (!r.out.empty()) {
    o << "  " << label << ":\n" << indent(escape_control(r.out, true));
    got = got || r.ok();
  }
  if (r.timed_out)
    o << "  " << label << ": no answer within " << seconds(timeout)
      << " s (a process in D state, e.g. in vfork or on a hung file system, or a stopped one, cannot be traced)\n";
  else if (!r.ok())
    o << "  " << label << ": " << escape_control(describe_failure(label, r, timeout)) << "\n";
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
    std::string syscall = one_line(read_small(t + "/syscall", 256));
    o << "    thread " << tid << " (" << one_line(read_small(t + "/comm", 64)) << ") wchan "
      << one_line(read_small(t + "/wchan", 128)) << " syscall " << syscall.substr(0, syscall.find(' ')) << "\n";
    std::string kstack = read_small(t + "/stack", 16 * 1024);
    if (!kstack.empty()) o << indent(indent(escape_control(kstack, true)));
  }
}

// Everything about one process that may block: its /proc text and the tools, each
// given at most tool_timeout and never past the deadline.
std::string look_at(pid_t pid, const StackTools& tools, double tool_timeout, Clock::time_point deadline) {
  auto timeout = [&] {
    return std::max(0.1, std::min(tool_timeout, std::chrono::duration<double>(deadline - Clock::now()).count()));
  };
  std::ostringstream o;
  const std::string p = std::to_string(pid);
  o << "   wchan: " << one_line(read_small("/proc/" + p + "/wchan", 128)) << "\n   cmdline: " << cmdline(pid) << "\n";
  bool got = false;
  if (!tools.py_spy.empty()) run_tool(o, "py-spy", {tools.py_spy, "dump", "--pid", p}, timeout(), got);
  // Without py-spy, or where it failed: gpudiag's own reader, which never stops the process.
  if (!got) {
    const auto budget = std::chrono::milliseconds(static_cast<long>(timeout() * 1000));
    o << format_python_stacks(read_python_stacks(pid, budget));
  }
  bool native = false;
  if (!tools.eu_stack.empty()) run_tool(o, "eu-stack", {tools.eu_stack, "-p", p}, timeout(), native);
  else if (!tools.gdb.empty())
    run_tool(o, "gdb", {tools.gdb, "-batch", "-nx", "-p", p, "-ex", "thread apply all bt"}, timeout(), native);
  if (!got && !native) proc_stacks(o, pid);
  return o.str();
}

// Shared with the workers, which may outlive the call when a read never returns.
struct Work {
  std::mutex m;
  std::condition_variable cv;
  std::vector<pid_t> pids;
  std::vector<std::string> text;
  std::vector<bool> done;
  std::size_t next = 0;     // the next process to look at
  std::size_t running = 0;  // processes being looked at now
  std::size_t quit = 0;     // workers that stopped
};

}  // namespace

std::string format_python_stacks(const PyStacks& s) {
  if (!s.why_none.empty() && s.threads.empty()) return "  Python: " + escape_control(s.why_none) + "\n";
  std::ostringstream o;
  o << "  Python stacks (" << escape_control(s.method) << ", CPython " << escape_control(s.python_version)
    << "), innermost frame first:\n";
  if (!s.why_none.empty()) o << "    " << escape_control(s.why_none) << "\n";
  for (const PyThread& t : s.threads) {
    o << "    thread " << t.tid << (t.holds_gil ? " (holds the GIL)" : "") << (t.frames.empty() ? ": no Python frames" : "")
      << (t.note.empty() ? "" : " [" + escape_control(t.note) + "]") << "\n";
    for (const PyFrame& f : t.frames)
      o << "      " << escape_control(f.function) << " (" << escape_control(f.file) << ":" << f.line << ")\n";
  }
  return o.str();
}

StackTools find_stack_tools() {
  return {find_on_path("py-spy"), find_on_path("eu-stack"), find_on_path("gdb")};
}

std::string stack_report(const std::string& header, const std::vector<TaskRoot>& tasks, const StackTools& tools,
                         double tool_timeout_s, double deadline_s) {
  if (deadline_s <= 0) deadline_s = tool_timeout_s + 5;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
  std::ostringstream o;
  o << header << "\n";
  o << "tools: py-spy " << (tools.py_spy.empty() ? "not found (Python stacks: gpudiag's reader)" : tools.py_spy)
    << ", eu-stack "
    << (tools.eu_stack.empty() ? "not found" : tools.eu_stack) << ", gdb " << (tools.gdb.empty() ? "not found" : tools.gdb)
    << "\n";
  ProcTable table = snapshot_processes();
  std::vector<std::vector<pid_t>> trees;
  auto work = std::make_shared<Work>();
  for (const auto& task : tasks) {
    trees.push_back(process_tree(table, task.pid));
    work->pids.insert(work->pids.end(), trees.back().begin(), trees.back().end());
  }
  work->text.resize(work->pids.size());
  work->done.resize(work->pids.size());

  const std::size_t workers = std::min(kWorkers, work->pids.size());
  std::size_t started = 0;
  for (std::size_t w = 0; w < workers; ++w) {
    try {
      std::thread([work, tools, tool_timeout_s, deadline] {
        std::unique_lock<std::mutex> lock(work->m);
        while (work->next < work->pids.size()) {
          const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
          if (left < kMinStart) break;
          const std::size_t i = work->next++;
          ++work->running;
          lock.unlock();
          std::string text = look_at(work->pids[i], tools, tool_timeout_s, deadline);
          lock.lock();
          --work->running;
          work->text[i] = std::move(text);
          work->done[i] = true;
        }
        ++work->quit;
        work->cv.notify_all();
      }).detach();
      ++started;
    } catch (...) {
      // No thread (out of resources): the workers that started share the work.
    }
  }
  {
    // Tools are killed at the deadline; a moment more lets their workers say so.
    std::unique_lock<std::mutex> lock(work->m);
    work->cv.wait_until(lock, deadline + std::chrono::milliseconds(500), [&] { return work->quit == started; });
  }

  std::lock_guard<std::mutex> lock(work->m);
  std::size_t i = 0;
  std::size_t skipped = 0;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    const auto& pids = trees[t];
    o << "\n== task " << (task.rank >= 0 ? "rank " + std::to_string(task.rank) : std::string("?")) << ": program pid "
      << task.pid << ", " << pids.size() << " process(es)\n";
    if (pids.empty()) o << "  (gone)\n";
    for (pid_t pid : pids) {
      const ProcStat& s = table.at(pid);
      o << "\n-- pid " << pid << " ppid " << s.ppid << " state " << escape_control(std::string(1, s.state)) << " ("
        << escape_control(s.comm) << ")\n";
      if (work->done[i]) {
        o << work->text[i];
      } else {
        o << "   not looked at: the report's deadline of " << seconds(deadline_s) << " s passed\n";
        ++skipped;
      }
      ++i;
    }
  }
  if (skipped)
    o << "\n" << skipped << " of " << work->pids.size() << " process(es) skipped at the report's deadline of "
      << seconds(deadline_s) << " s\n";
  return o.str();
}

}  // namespace gpudiag
