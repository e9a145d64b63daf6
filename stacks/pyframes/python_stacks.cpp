#include "stacks/pyframes/python_stacks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "stacks/pyframes/elf_image.h"
#include "stacks/pyframes/frame_walker.h"
#include "stacks/pyframes/process_memory.h"
#include "stacks/pyframes/proc_maps.h"

namespace gpudiag {
namespace {

using namespace pyframes;

constexpr std::size_t kMaxMaps = 8u << 20;
constexpr std::uint64_t kMaxElf = 2ull << 30;

// /proc text, bounded; errno is kept for the caller's reason.
bool read_proc(const std::string& path, std::string& out, std::size_t max, int& err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return false;
  }
  out.clear();
  char buf[65536];
  while (out.size() < max) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, max - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return true;
}

std::string first_field(const std::string& status, const std::string& key) {
  std::size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  while (at < status.size() && (status[at] == '\t' || status[at] == ' ')) ++at;
  std::size_t end = status.find_first_of("\t \n", at);
  return status.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Why reading `pid` was refused, and what would allow it.
std::string refused(pid_t pid, int err) {
  std::string scope, status;
  int ignored = 0;
  read_proc("/proc/sys/kernel/yama/ptrace_scope", scope, 16, ignored);
  while (!scope.empty() && (scope.back() == '\n' || scope.back() == ' ')) scope.pop_back();
  read_proc("/proc/" + std::to_string(pid) + "/status", status, 16384, ignored);
  const std::string uid = first_field("\n" + status, "Uid");
  const std::string me = std::to_string(::geteuid());
  std::string why = "no Python frames: reading pid " + std::to_string(pid) + "'s memory was refused (" +
                    std::strerror(err) + "): ";
  if (scope == "3")
    return why + "kernel.yama.ptrace_scope is 3, so no process may read another's memory until reboot; py-spy cannot "
                 "either (PYTHONFAULTHANDLER=1 and SIGABRT print the stacks, killing the rank)";
  if (scope == "2")
    return why + "kernel.yama.ptrace_scope is 2, so only root (CAP_SYS_PTRACE) may; run gpudiag stacks as root, or "
                 "set kernel.yama.ptrace_scope to 1 (the hang watchdog, an ancestor of the tasks, may read them then)";
  if (!uid.empty() && uid != me && ::geteuid() != 0)
    return why + "the process runs as uid " + uid + ", this reader as uid " + me +
           "; run it as the job's owner (gpudiag stacks does when run by them) or as root";
  if (scope == "1")
    return why + "kernel.yama.ptrace_scope is 1, so only a process's ancestors and root may; run gpudiag stacks as "
                 "root, or set kernel.yama.ptrace_scope to 0";
  return why + "the process is not dumpable (it changed its uid or called prctl(PR_SET_DUMPABLE, 0)), or a "
               "container or seccomp policy forbids it; run the reader as root with CAP_SYS_PTRACE";
}

// The file behind `m`, opened so that it is the very file mapped (same device and inode):
// through map_files (root), else the path as the target sees it, else the path here.
int open_mapped(pid_t pid, const Mapping& m) {
  char range[64];
  std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(m.start),
                static_cast<unsigned long long>(m.end));
  const std::string p = "/proc/" + std::to_string(pid);
  for (const std::string& path : {p + "/map_files/" + range, p + "/root" + m.path, m.path}) {
    // The name is the owner's to swap at any moment: resolve it once with O_PATH (which
    // opens nothing: no FIFO waits, no device's open runs), check what it found, and
    // open that very inode through its descriptor. A stat of the name and then an open
    // of it could open whatever the owner put there in between (a FIFO, /dev/watchdog),
    // as root under `gpudiag stacks --local`.
    int path_fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (path_fd < 0) continue;
    struct stat st;
    const bool same = ::fstat(path_fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino == m.inode &&
                      major(st.st_dev) == m.dev_major && minor(st.st_dev) == m.dev_minor &&
                      static_cast<std::uint64_t>(st.st_size) <= kMaxElf;
    int fd = same ? ::open(("/proc/self/fd/" + std::to_string(path_fd)).c_str(),
                           O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
                  : -1;
    ::close(path_fd);
    if (fd >= 0) return fd;
  }
  return -1;
}

struct Found {
  const Mapping* image = nullptr;
  ElfFacts elf;
  std::optional<std::uint32_t> version;
};

}  // namespace

PyStacks read_python_stacks(pid_t pid, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  PyStacks none;
  try {
    const std::string p = "/proc/" + std::to_string(pid);
    std::string text;
    int err = 0;
    if (!read_proc(p + "/maps", text, kMaxMaps, err)) {
      none.why_none = err == ENOENT || err == ESRCH ? "no Python frames: the process is gone"
                      : err == EACCES || err == EPERM ? refused(pid, err)
                                                      : "no Python frames: cannot read " + p + "/maps: " + std::strerror(err);
      return none;
    }
    const std::vector<Mapping> maps = parse_maps(text);
    char exe_buf[4096];
    ssize_t exe_len = ::readlink((p + "/exe").c_str(), exe_buf, sizeof exe_buf - 1);
    const std::string exe = exe_len > 0 ? std::string(exe_buf, static_cast<std::size_t>(exe_len)) : "";

    Found found;
    std::string elf_problem;
    // The main program is only a guess (an embedding one): what it lacks says nothing.
    auto guess = [](const Mapping& m) {
      std::string name = m.path.substr(m.path.rfind('/') + 1);
      return name.rfind("libpython3", 0) != 0 && name.rfind("python3", 0) != 0;
    };
    const std::string out_of_time = "no Python frames: reading took longer than its budget of " +
                                    std::to_string(budget.count()) + " ms (a huge or changing process)";
    for (const Mapping* m : python_image_candidates(maps, exe)) {
      // A process may map thousands of files named like libpython: the budget covers them.
      if (std::chrono::steady_clock::now() >= deadline) {
        none.why_none = out_of_time;
        return none;
      }
      int fd = open_mapped(pid, *m);
      if (fd < 0 && guess(*m)) continue;
      if (fd < 0) {
        elf_problem = "cannot open " + m->path + " as mapped (replaced since, or not visible here)";
        continue;
      }
      struct stat st;
      ::fstat(fd, &st);
      FileRead read = [fd](std::uint64_t off, void* out, std::size_t len) {
        return ::pread(fd, out, len, static_cast<off_t>(off)) == static_cast<ssize_t>(len);
      };
      ElfResult elf = parse_elf(read, static_cast<std::uint64_t>(st.st_size), deadline);
      if (elf.out_of_time) {
        ::close(fd);
        none.why_none = out_of_time;
        return none;
      }
      std::optional<std::uint32_t> version;
      if (elf.facts && elf.facts->py_version) {
        auto off = file_offset_of(*elf.facts, *elf.facts->py_version);
        std::uint32_t v = 0;
        if (off && read(*off, &v, sizeof v)) version = v;
      }
      ::close(fd);
      if (!elf.facts && guess(*m)) continue;
      if (!elf.facts) {
        elf_problem = m->path + ": " + elf.error;
        continue;
      }
      if (!elf.facts->py_runtime && !elf.facts->pyruntime_section) {
        if (guess(*m)) continue;
        elf_problem = m->path + " has neither a _PyRuntime symbol nor a .PyRuntime section" +
                      (elf.facts->stripped ? " (stripped)" : "");
        continue;
      }
      found = {m, std::move(*elf.facts), version};
      break;
    }
    if (!found.image) {
      none.why_none = "no Python frames: " +
                      (elf_problem.empty() ? std::string("not a CPython program (no libpython3 or python3 mapped)")
                                           : elf_problem);
      return none;
    }
    auto target = [&](std::uint64_t vaddr) -> std::uint64_t {
      auto off = file_offset_of(found.elf, vaddr);
      return off ? address_of_file_offset(maps, *found.image, *off) : 0;
    };
    WalkInput in;
    in.runtime = target(found.elf.py_runtime ? *found.elf.py_runtime : *found.elf.pyruntime_section);
    if (!in.runtime) {
      none.why_none = "no Python frames: _PyRuntime of " + found.image->path + " is not mapped in the process";
      return none;
    }
    in.file_version = found.version;
    if (found.elf.code_type) {
      std::uint64_t code_type = target(*found.elf.code_type);
      if (code_type) in.code_type = code_type;
    }
    in.deadline = deadline;
    ProcessMemory mem(pid);
    WalkResult r = walk_python(mem, in);
    if (r.read_errno == EPERM || r.read_errno == EACCES) r.stacks.why_none = refused(pid, r.read_errno);
    if (r.read_errno == ETIMEDOUT) r.stacks.why_none = out_of_time;
    return r.stacks;
  } catch (const std::exception& e) {
    none.threads.clear();
    none.why_none = std::string("no Python frames: ") + e.what();
  } catch (...) {
    none.why_none = "no Python frames: an unknown error";
  }
  return none;
}

}  // namespace gpudiag
