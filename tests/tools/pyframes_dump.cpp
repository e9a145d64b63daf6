// pyframes_dump PID...: every thread's Python stack of each PID, as gpudiag's reader
// (stacks/pyframes/) reads it, for checking the reader against Pythons this tree cannot
// build against: it is linked statically, so the one binary runs on a machine that has
// a Python but none of gpudiag's build dependencies (bench/pyframes_on_device.sh).
// Exit status: 0 when every PID gave frames, 1 when one did not, 2 on bad arguments.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "stacks/pyframes/python_stacks.h"
#include "util/control_bytes.h"

namespace {

// What a process's code named (function, file) may hold any byte.
std::string text(const std::string& s) { return gpudiag::escape_control(s); }

bool dump(pid_t pid) {
  const gpudiag::PyStacks s = gpudiag::read_python_stacks(pid, std::chrono::seconds(10));
  std::printf("pid %d: CPython %s, %s\n", static_cast<int>(pid), s.python_version.empty() ? "?" : s.python_version.c_str(),
              s.method.empty() ? "-" : s.method.c_str());
  if (!s.why_none.empty()) std::printf("  %s\n", text(s.why_none).c_str());
  for (const gpudiag::PyThread& t : s.threads) {
    std::printf("  thread %ld%s%s\n", t.tid, t.holds_gil ? " (holds the GIL)" : "",
                t.note.empty() ? "" : (" [" + text(t.note) + "]").c_str());
    for (const gpudiag::PyFrame& f : t.frames)
      std::printf("    %s (%s:%d)\n", text(f.function).c_str(), text(f.file).c_str(), f.line);
  }
  bool any = false;
  for (const gpudiag::PyThread& t : s.threads) any = any || !t.frames.empty();
  return any;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pyframes_dump PID...\n");
    return 2;
  }
  bool all = true;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    errno = 0;
    const long pid = std::strtol(argv[i], &end, 10);
    if (errno || end == argv[i] || *end || pid <= 0) {
      std::fprintf(stderr, "pyframes_dump: not a PID: %s\n", text(argv[i]).c_str());
      return 2;
    }
    all = dump(static_cast<pid_t>(pid)) && all;
  }
  std::fflush(stdout);
  return all ? 0 : 1;
}
