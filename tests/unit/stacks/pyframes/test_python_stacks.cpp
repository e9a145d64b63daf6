// The Python stack reader against real CPython processes (whatever /usr/bin/python3 is:
// 3.11 on Debian 12, 3.13 under scripts/test-on trixie; and every other CPython 3.11 or
// later found in ~/.pyenv/versions or named in GPUDIAG_TEST_PYTHONS, colon-separated),
// and its pure parts against hand-made input.
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/pyframes_walk_mode.h"
#include "stacks/pyframes/elf_image.h"
#include "stacks/pyframes/frame_walker.h"
#include "stacks/pyframes/line_table.h"
#include "stacks/pyframes/proc_maps.h"
#include "stacks/pyframes/process_memory.h"
#include "stacks/pyframes/python_layout.h"
#include "stacks/pyframes/python_stacks.h"
#include "stacks/stack_report.h"

namespace gpudiag {
namespace {

using namespace std::chrono_literals;
using pyframes::line_for_offset;

constexpr const char* kPython = "/usr/bin/python3";

// The CPythons to read: kPython, then those of 3.11 and later that pyenv holds
// ($PYENV_ROOT, else ~/.pyenv), then those named in GPUDIAG_TEST_PYTHONS.
std::vector<std::string> test_pythons() {
  std::vector<std::string> found{kPython};
  const char* root = std::getenv("PYENV_ROOT");
  const char* home = std::getenv("HOME");
  const std::string pyenv = root ? root : home ? std::string(home) + "/.pyenv" : "";
  glob_t g{};
  if (!pyenv.empty() && ::glob((pyenv + "/versions/3.1[1-9]*/bin/python3").c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  const std::string extra = std::getenv("GPUDIAG_TEST_PYTHONS") ? std::getenv("GPUDIAG_TEST_PYTHONS") : "";
  for (std::size_t at = 0; at < extra.size();) {
    std::size_t end = extra.find(':', at);
    if (end == std::string::npos) end = extra.size();
    if (end > at) found.push_back(extra.substr(at, end - at));
    at = end + 1;
  }
  return found;
}

// A script whose threads each block in C at a known line, then say "ready" on stdout.
// Line numbers matter: the test asserts them.
const char* kScript = R"PY(import os, socket, sys, threading, time

def sleeper(ready):
    ready.set()
    time.sleep(3600)  # line 5

class Waiter:
    def wait_here(self, ready):
        ev = threading.Event()
        ready.set()
        ev.wait()  # line 11

def receiver(ready, sock):
    ready.set()
    sock.recv(1)  # line 15

def main():
    a, b = socket.socketpair()
    started = []
    for target, args in ((sleeper, ()), (Waiter().wait_here, ()), (receiver, (a,))):
        ready = threading.Event()
        threading.Thread(target=target, args=(ready,) + args, daemon=True).start()
        ready.wait()
        started.append(ready)
    print("ready", threading.get_native_id(), flush=True)
    sys.stdin.read()  # line 26

main()  # line 28
)PY";

struct Child {
  pid_t pid = -1;
  int out = -1, in = -1;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out >= 0) ::close(out);
    if (in >= 0) ::close(in);
  }
};

std::string script_path() {
  static std::string path = [] {
    char tmpl[] = "/tmp/gpudiag_pyframes_XXXXXX";
    int fd = ::mkstemp(tmpl);
    std::string s = std::string(tmpl);
    (void)!::write(fd, kScript, std::strlen(kScript));
    ::close(fd);
    return s;
  }();
  return path;
}

// Starts `argv` with a pipe on stdin and stdout; returns once the first line arrived.
bool start(Child& c, const std::vector<std::string>& argv, std::string& first_line) {
  int out[2], in[2];
  if (::pipe2(out, O_CLOEXEC) || ::pipe2(in, O_CLOEXEC)) return false;
  c.pid = ::fork();
  if (c.pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(in[0]);
  c.out = out[0];
  c.in = in[1];
  char ch;
  while (::read(c.out, &ch, 1) == 1 && ch != '\n') first_line += ch;
  return !first_line.empty();
}

// Waits until the process's main thread sits in read(2) (the scripts block there after
// saying "ready", so a read of their stacks cannot race their last lines).
bool wait_in_read(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    std::ifstream sc("/proc/" + std::to_string(pid) + "/syscall");
    long nr = -1;
    if (sc >> nr && nr == __NR_read) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::string dump(const PyStacks& s);

// The stacks once the same answer comes twice with no thread holding the GIL: each
// thread said "ready" just before blocking, and may be between the two.
PyStacks settled_stacks(pid_t pid) {
  PyStacks last = read_python_stacks(pid, 5000ms);
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(20ms);
    PyStacks now = read_python_stacks(pid, 5000ms);
    bool gil = false;
    for (const auto& t : now.threads) gil = gil || t.holds_gil;
    if (!gil && dump(now) == dump(last)) return now;
    last = now;
  }
  return last;
}

const PyThread* thread_with(const PyStacks& s, const std::string& function) {
  for (const auto& t : s.threads)
    if (!t.frames.empty() && t.frames.front().function == function) return &t;
  return nullptr;
}

std::string dump(const PyStacks& s) {
  std::string o = "version " + s.python_version + " method " + s.method + " why_none " + s.why_none + "\n";
  for (const auto& t : s.threads) {
    o += "thread " + std::to_string(t.tid) + (t.holds_gil ? " gil" : "") + (t.note.empty() ? "" : " note " + t.note) + "\n";
    for (const auto& f : t.frames) o += "  " + f.function + " " + f.file + ":" + std::to_string(f.line) + "\n";
  }
  return o;
}

// Reads every thread of `python` running kScript and checks each one's frames.
void check_every_thread(const std::string& python) {
  Child c;
  std::string ready;
  ASSERT_TRUE(start(c, {python, script_path()}, ready)) << python << " did not start";
  ASSERT_EQ(ready.rfind("ready ", 0), 0u) << ready;
  const long main_tid = std::stol(ready.substr(6));
  ASSERT_TRUE(wait_in_read(c.pid));

  PyStacks s = settled_stacks(c.pid);
  SCOPED_TRACE(dump(s));
  EXPECT_EQ(s.why_none, "");
  EXPECT_EQ(s.method.rfind("gpudiag (CPython 3.", 0), 0u);
  EXPECT_EQ(s.python_version.rfind("3.", 0), 0u);
  ASSERT_EQ(s.threads.size(), 4u);
  const std::string file = script_path();

  const PyThread* sleeper = thread_with(s, "sleeper");
  ASSERT_NE(sleeper, nullptr);
  EXPECT_EQ(sleeper->frames[0].file, file);
  EXPECT_EQ(sleeper->frames[0].line, 5);
  // Then threading's own frames: Thread.run, _bootstrap_inner, _bootstrap.
  ASSERT_GE(sleeper->frames.size(), 2u);
  EXPECT_EQ(sleeper->frames[1].function, "Thread.run");
  EXPECT_NE(sleeper->frames[1].file.find("threading.py"), std::string::npos);
  EXPECT_EQ(sleeper->frames.back().function, "Thread._bootstrap");

  // Event.wait blocks in Condition.wait, in C (lock.acquire): innermost is threading's.
  const PyThread* waiter = thread_with(s, "Condition.wait");
  ASSERT_NE(waiter, nullptr);
  ASSERT_GE(waiter->frames.size(), 3u);
  EXPECT_EQ(waiter->frames[1].function, "Event.wait");
  EXPECT_EQ(waiter->frames[2].function, "Waiter.wait_here");  // the qualname
  EXPECT_EQ(waiter->frames[2].file, file);
  EXPECT_EQ(waiter->frames[2].line, 11);

  const PyThread* receiver = thread_with(s, "receiver");
  ASSERT_NE(receiver, nullptr);
  EXPECT_EQ(receiver->frames[0].line, 15);

  const PyThread* main = thread_with(s, "main");
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->tid, main_tid);
  ASSERT_EQ(main->frames.size(), 2u);
  EXPECT_EQ(main->frames[0].line, 26);
  EXPECT_EQ(main->frames[1].function, "<module>");
  EXPECT_EQ(main->frames[1].line, 28);

  // Every thread is blocked in C with the GIL released; each tid is one of the process's.
  for (const auto& t : s.threads) {
    EXPECT_FALSE(t.holds_gil);
    EXPECT_EQ(::access(("/proc/" + std::to_string(c.pid) + "/task/" + std::to_string(t.tid)).c_str(), F_OK), 0);
  }
  // Reading did not stop it: it is still sleeping, not traced.
  std::ifstream status("/proc/" + std::to_string(c.pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("TracerPid:", 0) == 0) {
      EXPECT_EQ(line.substr(line.find_last_of("\t ") + 1), "0");
    }
  }
}

TEST(PythonStacks, EveryThreadOfARealPythonBlockedInC) {
  for (const std::string& python : test_pythons()) {
    SCOPED_TRACE(python);
    check_every_thread(python);
  }
}

// What read_python_stacks finds before it walks, found here the plain way (the test
// trusts the files it starts), so that a test can walk with a layout of its choosing.
std::optional<pyframes::WalkInput> locate_python(pid_t pid) {
  std::ifstream maps_file("/proc/" + std::to_string(pid) + "/maps");
  std::string text((std::istreambuf_iterator<char>(maps_file)), std::istreambuf_iterator<char>());
  const auto maps = pyframes::parse_maps(text);
  char exe[4096];
  ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
  for (const pyframes::Mapping* m : pyframes::python_image_candidates(maps, n > 0 ? std::string(exe, n) : "")) {
    int fd = ::open(m->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    pyframes::FileRead read = [fd](std::uint64_t off, void* out, std::size_t len) {
      return ::pread(fd, out, len, static_cast<off_t>(off)) == static_cast<ssize_t>(len);
    };
    auto elf = pyframes::parse_elf(read, static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END)));
    std::uint32_t version = 0;
    bool have_version = false;
    if (elf.facts && elf.facts->py_version) {
      auto off = pyframes::file_offset_of(*elf.facts, *elf.facts->py_version);
      have_version = off && read(*off, &version, sizeof version);
    }
    ::close(fd);
    if (!elf.facts || !elf.facts->py_runtime || !elf.facts->code_type || !have_version) continue;
    auto target = [&](std::uint64_t vaddr) -> std::uint64_t {
      auto off = pyframes::file_offset_of(*elf.facts, vaddr);
      return off ? pyframes::address_of_file_offset(maps, *m, *off) : 0;
    };
    pyframes::WalkInput in;
    in.runtime = target(*elf.facts->py_runtime);
    in.code_type = target(*elf.facts->code_type);
    in.file_version = version;
    return in;
  }
  return std::nullopt;
}

// A real 3.11 process read with 3.12's layout, and a real 3.12 one with 3.11's (what a
// wrong layout meets: real memory, every field plausible): refused with the reason,
// never frames.
TEST(PythonStacks, ARealPythonReadWithTheWrongLayoutIsRefused) {
  int tried = 0;
  for (const std::string& python : test_pythons()) {
    SCOPED_TRACE(python);
    Child c;
    std::string ready;
    ASSERT_TRUE(start(c, {python, script_path()}, ready)) << python << " did not start";
    ASSERT_TRUE(wait_in_read(c.pid));
    auto in = locate_python(c.pid);
    ASSERT_TRUE(in);
    const unsigned minor = (*in->file_version >> 16) & 0xff;
    if (minor != 11 && minor != 12) continue;  // 3.13 and later state their own layout
    ++tried;
    pyframes::ProcessMemory mem(c.pid);
    // The right layout first, through the same located input.
    auto right = pyframes::walk_python(mem, *in);
    EXPECT_EQ(right.stacks.why_none, "");
    EXPECT_EQ(right.stacks.threads.size(), 4u);
    in->file_version = (*in->file_version & 0xff00ffff) | ((minor == 11 ? 12u : 11u) << 16);
    auto wrong = pyframes::walk_python(mem, *in);
    EXPECT_TRUE(wrong.stacks.threads.empty()) << dump(wrong.stacks);
    EXPECT_EQ(wrong.stacks.why_none.rfind("no Python frames: ", 0), 0u) << wrong.stacks.why_none;
    EXPECT_NE(wrong.stacks.why_none.find(" does not fit gpudiag (CPython 3.1"), std::string::npos)
        << wrong.stacks.why_none;
    std::cout << python << " read as " << pyframes::version_text(*in->file_version) << ": " << wrong.stacks.why_none
              << "\n";
  }
  // Debian 12's /usr/bin/python3 is 3.11; Debian 13's is 3.13, which states its layout.
  if (tried == 0) GTEST_SKIP() << "no CPython 3.11 or 3.12 to read here";
}

// The hang report without py-spy: every process's Python stacks from gpudiag's reader,
// named as such, with the names a program chose escaped (a code object's name is the
// program's to set).
TEST(PythonStacks, TheStackReportCarriesThemWithoutPySpy) {
  Child c;
  std::string ready;
  ASSERT_TRUE(start(c, {kPython, "-c",
                        "import sys, time\n"
                        "def f():\n"
                        "    print('ready', flush=True)\n"
                        "    sys.stdin.read()\n"
                        "f.__code__ = f.__code__.replace(co_qualname='evil\\x1b[2J', co_name='evil\\x1b[2J')\n"
                        "f()\n"},
                    ready));
  ASSERT_TRUE(wait_in_read(c.pid));
  std::string report = stack_report("h", {{0, c.pid}}, StackTools{}, 5);
  EXPECT_NE(report.find("py-spy not found (Python stacks: gpudiag's reader)"), std::string::npos) << report;
  EXPECT_NE(report.find("  Python stacks (gpudiag (CPython 3."), std::string::npos) << report;
  EXPECT_NE(report.find("      evil\\x1b[2J (<string>:4)\n      <module> (<string>:6)\n"), std::string::npos) << report;
  EXPECT_EQ(report.find('\x1b'), std::string::npos) << report;
}

TEST(PythonStacks, AProgramThatIsNotPythonSaysSo) {
  Child c;
  std::string first;
  ASSERT_TRUE(start(c, {"/bin/sh", "-c", "echo up; exec sleep 600"}, first));
  // The shell execs sleep after the echo: wait until it did.
  for (int i = 0; i < 200; ++i) {
    std::ifstream comm("/proc/" + std::to_string(c.pid) + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "sleep") break;
    std::this_thread::sleep_for(10ms);
  }
  PyStacks s = read_python_stacks(c.pid, 2000ms);
  EXPECT_TRUE(s.threads.empty());
  EXPECT_EQ(s.why_none, "no Python frames: not a CPython program (no libpython3 or python3 mapped)");
}

TEST(PythonStacks, AProcessThatIsGoneSaysSo) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  PyStacks s = read_python_stacks(pid, 1000ms);
  EXPECT_TRUE(s.threads.empty());
  EXPECT_EQ(s.why_none, "no Python frames: the process is gone");
}

// A process that exits while it is read: the reader, looping over it, sees a clean
// answer or a reason every time, never a crash or a half-filled result.
TEST(PythonStacks, AProcessThatExitsMidReadGivesAReason) {
  Child c;
  std::string ready;
  ASSERT_TRUE(start(c, {kPython, script_path()}, ready));
  std::thread killer([&] {
    std::this_thread::sleep_for(20ms);
    ::kill(c.pid, SIGKILL);
  });
  int answers = 0, reasons = 0;
  for (int i = 0; i < 2000 && reasons == 0; ++i) {
    PyStacks s = read_python_stacks(c.pid, 1000ms);
    if (s.why_none.empty()) {
      ++answers;
      EXPECT_FALSE(s.threads.empty());
    } else {
      ++reasons;
      EXPECT_EQ(s.why_none.rfind("no Python frames: ", 0), 0u) << s.why_none;
      EXPECT_TRUE(s.threads.empty()) << dump(s);
    }
  }
  killer.join();
  ::waitpid(c.pid, nullptr, 0);
  c.pid = -1;
  EXPECT_GT(reasons, 0);
  // Once reaped, it is gone.
}

// A hostile rank's owner maps files named like libpython whose section headers point
// `symtabs` symbol tables of 2^20 entries at one 64 MiB string table (sparse files:
// nothing on disk). Each table is within the parser's bounds; together they made the
// reader, root's `gpudiag stacks --local` included, read 88 MiB per table before the
// budget was ever looked at (4096 tables: 360 GB for one file, for hours).
constexpr std::uint64_t kHostileStrtabOff = 1u << 20, kHostileStrtabSize = 64u << 20;
constexpr std::uint64_t kHostileSymtabSize = 24ull << 20;

std::string hostile_libpython(const std::string& path, int symtabs) {
  const std::uint64_t symtab_off = kHostileStrtabOff + kHostileStrtabSize;
  std::vector<unsigned char> head(kHostileStrtabOff, 0);
  auto put = [&](std::size_t at, auto v) { std::memcpy(head.data() + at, &v, sizeof v); };
  std::memcpy(head.data(), "\x7f" "ELF\x02\x01\x01", 7);
  put(40, std::uint64_t{64});                          // e_shoff
  put(54, std::uint16_t{56});                          // e_phentsize (no program headers)
  put(58, std::uint16_t{64});                          // e_shentsize
  put(60, static_cast<std::uint16_t>(symtabs + 2));    // e_shnum: null, strtab, symtabs
  std::size_t sh = 64 + 64;                            // section 1: the string table
  put(sh + 4, std::uint32_t{3});
  put(sh + 24, kHostileStrtabOff);
  put(sh + 32, kHostileStrtabSize);
  for (int i = 0; i < symtabs; ++i) {
    sh += 64;
    put(sh + 4, std::uint32_t{i % 2 ? 2u : 11u});  // SHT_SYMTAB, SHT_DYNSYM
    put(sh + 24, symtab_off);
    put(sh + 32, kHostileSymtabSize);
    put(sh + 40, std::uint32_t{1});  // sh_link: the string table
    put(sh + 56, std::uint64_t{24});
  }
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return "";
  const bool ok = ::write(fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()) &&
                  ::ftruncate(fd, static_cast<off_t>(symtab_off + kHostileSymtabSize)) == 0;
  ::close(fd);
  return ok ? path : "";
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpudiag_hostile_elf_XXXXXX";
    if (::mkdtemp(tmpl)) path = tmpl;
  }
  ~TempDir() {  // holds files only
    if (DIR* d = path.empty() ? nullptr : ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') ::unlink((path + "/" + e->d_name).c_str());
      ::closedir(d);
      ::rmdir(path.c_str());
    }
  }
};

TEST(ElfImage, ReadsOneSymbolTableOfEachKindAndStopsAtTheDeadline) {
  TempDir dir;
  const std::string lib = hostile_libpython(dir.path + "/libpython3.99-hostile.so", 64);
  ASSERT_FALSE(lib.empty());
  int fd = ::open(lib.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::uint64_t bytes = 0;
  pyframes::FileRead read = [&](std::uint64_t off, void* out, std::size_t len) {
    bytes += len;
    return ::pread(fd, out, len, static_cast<off_t>(off)) == static_cast<ssize_t>(len);
  };
  const std::uint64_t size = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
  auto r = pyframes::parse_elf(read, size);
  ASSERT_TRUE(r.facts) << r.error;
  EXPECT_FALSE(r.facts->py_runtime);
  // One .dynsym and one .symtab with their string table; before: 64 of each, 5.6 GB.
  EXPECT_LE(bytes, 2 * (kHostileStrtabSize + kHostileSymtabSize) + kHostileStrtabOff);
  bytes = 0;
  auto late = pyframes::parse_elf(read, size, std::chrono::steady_clock::now());
  EXPECT_TRUE(late.out_of_time);
  EXPECT_FALSE(late.facts);
  EXPECT_LT(bytes, kHostileStrtabSize);
  ::close(fd);
}

TEST(PythonStacks, HostileLibpythonsCannotKeepTheReaderPastItsBudget) {
  TempDir dir;
  std::vector<std::string> libs;
  for (int i = 0; i < 16; ++i) {
    libs.push_back(hostile_libpython(dir.path + "/libpython3.99-hostile" + std::to_string(i) + ".so", 4));
    ASSERT_FALSE(libs.back().empty());
  }
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    bool all = true;
    for (const auto& lib : libs) {
      int fd = ::open(lib.c_str(), O_RDONLY);
      all = all && fd >= 0 && ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0) != MAP_FAILED;
    }
    (void)!::write(pipe_fds[1], all ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char mapped = 0;
  ASSERT_EQ(::read(pipe_fds[0], &mapped, 1), 1);
  ::close(pipe_fds[0]);
  EXPECT_EQ(mapped, 'y');
  // 16 files of 88 MiB to read at least: far more than 50 ms on any machine.
  PyStacks s = read_python_stacks(pid, 50ms);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(s.threads.empty());
  EXPECT_EQ(s.why_none, "no Python frames: reading took longer than its budget of 50 ms (a huge or changing process)");
}

// ---- pure parts ----

// co_linetable of `def f():\n    x = 1\n    return x` (3.11/3.13 form, first line 1),
// hand-encoded: RESUME on line 1 (short form, 1 unit), then line 2 (+1) 2 units, then
// line 3 (+1) 2 units, then an entry without location.
TEST(LineTable, DecodesEntriesByByteOffset) {
  const std::uint8_t table[] = {
      0x80 | (0 << 3) | 0, 0x00,              // code 0 (short form), 1 unit, line +0
      0x80 | (11 << 3) | 1, 0x04, 0x05,       // one-line form +1, 2 units
      0x80 | (13 << 3) | 1, 0x02,             // no columns, svarint +1, 2 units
      0x80 | (15 << 3) | 0,                   // no location, 1 unit
      0x80 | (14 << 3) | 0, 0x05, 0x00, 0x00, 0x00,  // long form, -2 (svarint 5), 1 unit
  };
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 0), 1);
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 2), 2);
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 4), 2);
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 6), 3);
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 8), 3);
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 10), 0);  // no location
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 12), 1);  // 3 - 2
  EXPECT_EQ(line_for_offset(table, sizeof table, 1, 14), 0);  // past the end
  EXPECT_EQ(line_for_offset(table, 9, 1, 12), 0);             // cut inside an entry's line delta
}

TEST(ProcMaps, FindsLibpythonFirstThenThePythonExecutable) {
  const char* text =
      "00400000-00420000 r--p 00000000 fe:01 100 /usr/bin/python3.11\n"
      "7f0000000000-7f0000100000 r--p 00000000 fe:01 200 /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0\n"
      "7f0000100000-7f0000200000 rw-p 00100000 fe:01 200 /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0\n"
      "7f0000300000-7f0000400000 rw-p 00000000 00:00 0 \n"
      "7f0000500000-7f0000600000 r-xp 00000000 fe:01 300 /opt/my prog (deleted)\n"
      "garbage line\n";
  auto maps = pyframes::parse_maps(text);
  ASSERT_EQ(maps.size(), 5u);
  EXPECT_EQ(maps[4].path, "/opt/my prog (deleted)");
  EXPECT_EQ(maps[3].path, "");
  auto c = pyframes::python_image_candidates(maps, "/opt/my prog (deleted)");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0]->inode, 200u);
  EXPECT_EQ(c[1]->inode, 100u);
  EXPECT_EQ(c[2]->inode, 300u);
  EXPECT_EQ(pyframes::address_of_file_offset(maps, *c[0], 0x100010), 0x7f0000100010u);
  EXPECT_EQ(pyframes::address_of_file_offset(maps, *c[0], 0x300000), 0u);
}

TEST(ElfImage, FindsThePythonRuntimeInTheRealInterpreter) {
  char real[4096];
  ssize_t n = ::readlink(kPython, real, sizeof real - 1);
  std::string path = n > 0 ? (real[0] == '/' ? std::string(real, n) : "/usr/bin/" + std::string(real, n)) : kPython;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  off_t size = ::lseek(fd, 0, SEEK_END);
  auto r = pyframes::parse_elf(
      [fd](std::uint64_t off, void* out, std::size_t len) {
        return ::pread(fd, out, len, static_cast<off_t>(off)) == static_cast<ssize_t>(len);
      },
      static_cast<std::uint64_t>(size));
  ::close(fd);
  ASSERT_TRUE(r.facts) << r.error;
  // Debian links libpython into the executable and exports its symbols.
  ASSERT_TRUE(r.facts->pyruntime_section);
  ASSERT_TRUE(r.facts->py_runtime);
  EXPECT_EQ(*r.facts->py_runtime, *r.facts->pyruntime_section);
  EXPECT_TRUE(r.facts->py_version);
  EXPECT_TRUE(r.facts->code_type);
}

TEST(ElfImage, RefusesWhatIsNotElf) {
  std::string junk(200, 'x');
  auto read = [&](std::uint64_t off, void* out, std::size_t len) {
    if (off > junk.size() || len > junk.size() - off) return false;
    std::memcpy(out, junk.data() + off, len);
    return true;
  };
  EXPECT_EQ(pyframes::parse_elf(read, junk.size()).error, "not an ELF file");
  EXPECT_EQ(pyframes::parse_elf(read, 10).error, "shorter than an ELF header");
}

// 3.11 and 3.12 have one layout per minor version: every final release of it is read
// (the walk's checks refuse memory that does not fit); pre-releases of x.y.0 and other
// versions are refused with the reason.
TEST(PythonLayout, EveryReleaseOf311And312IsReadAndOthersAreRefused) {
  EXPECT_EQ(pyframes::version_text(0x030B02F0), "3.11.2");
  EXPECT_EQ(pyframes::version_text(0x030E00C1), "3.14.0rc1");
  for (std::uint32_t v : {0x030B00F0u, 0x030B02F0u, 0x030B07F0u, 0x030B0EF0u, 0x030B05C1u}) {
    auto r = pyframes::layout_from_headers(v);
    ASSERT_TRUE(r.layout) << pyframes::version_text(v) << ": " << r.why_not;
    EXPECT_EQ(r.layout->method, "gpudiag (CPython 3.11 layout)");
    EXPECT_EQ(r.layout->version, v);
    EXPECT_EQ(r.layout->frame_code, 32u);
  }
  for (std::uint32_t v : {0x030C00F0u, 0x030C01F0u, 0x030C03F0u, 0x030C0AF0u, 0x030C0DF0u}) {
    auto r = pyframes::layout_from_headers(v);
    ASSERT_TRUE(r.layout) << pyframes::version_text(v) << ": " << r.why_not;
    EXPECT_EQ(r.layout->method, "gpudiag (CPython 3.12 layout)");
    EXPECT_EQ(r.layout->frame_code, 0u);
    EXPECT_EQ(r.layout->interp_threads_head, 72u);
    EXPECT_FALSE(r.layout->gil_in_runtime);
  }
  auto pre = pyframes::layout_from_headers(0x030C00C1);
  EXPECT_FALSE(pre.layout);
  EXPECT_EQ(pre.why_not, "CPython 3.12.0rc1 is a pre-release, whose layout may differ from 3.12.0's; install py-spy");
  EXPECT_FALSE(pyframes::layout_from_headers(0x030B00B4).layout);
  auto old = pyframes::layout_from_headers(0x030A0EF0);
  EXPECT_FALSE(old.layout);
  EXPECT_EQ(old.why_not, "CPython 3.10.14 is not supported by gpudiag's reader (3.11 to 3.14 are); install py-spy");

  unsigned char table[pyframes::kDebugOffsetsRead] = {};
  std::memcpy(table, "xdebugpy", 8);
  std::uint64_t v = 0x030F00A1;
  std::memcpy(table + 8, &v, 8);
  EXPECT_NE(pyframes::layout_from_debug_offsets(table, sizeof table).why_not.find("3.15.0a1's debug offsets table is in "
                                                                                   "a form this gpudiag does not know"),
            std::string::npos);
  v = 0x030D05F0;
  std::memcpy(table + 8, &v, 8);
  // All offsets zero and sizes zero: not CPython's.
  EXPECT_NE(pyframes::layout_from_debug_offsets(table, sizeof table).why_not.find("outside its own structures"),
            std::string::npos);
}

// A fake process memory made of a byte buffer at a fixed address.
class BufferMemory : public pyframes::MemoryReader {
 public:
  BufferMemory(std::uint64_t base, std::vector<unsigned char> bytes) : base_(base), bytes_(std::move(bytes)) {}
  bool read(std::uint64_t addr, void* out, std::size_t len) override {
    if (addr < base_ || addr - base_ > bytes_.size() || len > bytes_.size() - (addr - base_)) {
      error_ = EFAULT;
      return false;
    }
    std::memcpy(out, bytes_.data() + (addr - base_), len);
    return true;
  }

 private:
  std::uint64_t base_;
  std::vector<unsigned char> bytes_;
};

TEST(FrameWalker, GarbageAndLoopsEndWithAReason) {
  // A 3.11 runtime whose interpreter's thread list points at itself, and whose frame
  // chain loops: the walk ends, capped, with notes.
  const std::uint64_t base = 0x10000;
  std::vector<unsigned char> mem(0x4000, 0);
  auto put = [&](std::uint64_t addr, std::uint64_t v) { std::memcpy(mem.data() + (addr - base), &v, 8); };
  put(base + 40, base + 0x1000);            // interpreters.head
  put(base + 0x1000 + 16, base + 0x2000);   // threads.head
  put(base + 0x2000 + 8, base + 0x2000);    // tstate->next: itself
  put(base + 0x2000 + 16, base + 0x1000);   // tstate->interp
  put(base + 0x2000 + 160, 4242);           // native_thread_id
  put(base + 0x2000 + 56, base + 0x2800);   // cframe
  put(base + 0x2800 + 8, base + 0x3000);    // current_frame
  put(base + 0x3000 + 48, base + 0x3000);   // previous: itself
  put(base + 0x3000 + 32, base + 0x3800);   // f_code: zeroes, not readable as strings
  BufferMemory m(base, mem);
  pyframes::WalkInput in;
  in.runtime = base;
  in.file_version = 0x030B02F0;
  auto r = pyframes::walk_python(m, in);
  ASSERT_EQ(r.stacks.threads.size(), 1u) << r.stacks.why_none;
  EXPECT_EQ(r.stacks.threads[0].tid, 4242);
  EXPECT_NE(r.stacks.threads[0].note.find("loops back"), std::string::npos) << r.stacks.threads[0].note;
  ASSERT_EQ(r.stacks.threads[0].frames.size(), 1u);
  EXPECT_EQ(r.stacks.threads[0].frames[0].function, "<unreadable code object>");

  in.file_version = 0x030A0EF0;
  r = pyframes::walk_python(m, in);
  EXPECT_EQ(r.stacks.why_none,
            "no Python frames: CPython 3.10.14 is not supported by gpudiag's reader (3.11 to 3.14 are); install "
            "py-spy");
  in.file_version.reset();
  r = pyframes::walk_python(m, in);
  EXPECT_NE(r.stacks.why_none.find("the exact CPython version is unknown"), std::string::npos);
  in.runtime = 0x90000;
  r = pyframes::walk_python(m, in);
  EXPECT_NE(r.stacks.why_none.find("is unreadable"), std::string::npos) << r.stacks.why_none;
}

// A fuzzer seed (fuzz/seeds/pyframes_walk/NAME): the mode byte, then the memory image.
std::vector<unsigned char> seed(const std::string& name) {
  std::ifstream f(std::string(GPUDIAG_SOURCE_DIR) + "/fuzz/seeds/pyframes_walk/" + name, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 2) ADD_FAILURE() << "no seed " << name;
  return bytes;
}

// A seed walked as the fuzzer walks it; `version` replaces the version the mode states.
pyframes::WalkResult walk_seed(const std::vector<unsigned char>& bytes,
                               std::optional<std::uint32_t> version = std::nullopt) {
  if (bytes.size() < 2) return {};
  BufferMemory m(0x10000, std::vector<unsigned char>(bytes.begin() + 1, bytes.end()));
  pyframes::WalkInput in = pyframes::walk_input_for_mode(bytes[0], 0x10000);
  if (version) in.file_version = version;
  return pyframes::walk_python(m, in);
}

// The fuzzer's seeds are whole images of each version's structures (fuzz/seeds/
// pyframes_walk: 3.11's and 3.12's layouts, fuzz/make_pyframes_seeds.py; 3.13.5's and
// 3.14.8's debug offsets tables as their Debian binaries carry them): the walk through
// each gives the same two frames.
TEST(FrameWalker, SeedImagesOfEachVersionWalk) {
  for (const char* name : {"cpython-3.11.2", "cpython-3.12", "cpython-3.13", "cpython-3.14"}) {
    SCOPED_TRACE(name);
    auto r = walk_seed(seed(name));
    ASSERT_EQ(r.stacks.why_none, "");
    EXPECT_EQ(r.stacks.python_version.substr(0, 4), std::string(name).substr(8, 4));
    ASSERT_EQ(r.stacks.threads.size(), 1u);
    const auto& t = r.stacks.threads[0];
    EXPECT_EQ(t.tid, 1234);
    ASSERT_EQ(t.frames.size(), 2u) << t.note;
    EXPECT_EQ(t.frames[0].function, "fn");
    EXPECT_EQ(t.frames[0].file, "file.py");
    EXPECT_EQ(t.frames[0].line, 12);
    EXPECT_EQ(t.frames[1].line, 11);
  }
  // Any 3.11 or 3.12 release reads its minor version's layout.
  auto r = walk_seed(seed("cpython-3.11.2"), 0x030B0EF0);
  EXPECT_EQ(r.stacks.python_version, "3.11.14");
  ASSERT_EQ(r.stacks.threads.size(), 1u) << r.stacks.why_none;
  EXPECT_EQ(r.stacks.threads[0].frames.size(), 2u);
  r = walk_seed(seed("cpython-3.12"), 0x030C00F0);
  EXPECT_EQ(r.stacks.python_version, "3.12.0");
  ASSERT_EQ(r.stacks.threads.size(), 1u) << r.stacks.why_none;
  EXPECT_EQ(r.stacks.threads[0].frames.size(), 2u);
}

// A process whose memory is not laid out as gpudiag's layout for its version says (a
// patched or differently built CPython) gives a refusal that says so, never frames read
// through the wrong offsets.
TEST(FrameWalker, AWrongLayoutIsRefusedNotWalked) {
  const std::string fix = " (a patched or differently built CPython, or not CPython's memory); install py-spy";
  auto r = walk_seed(seed("wrong-3.12-tstate-field-added"));
  EXPECT_TRUE(r.stacks.threads.empty());
  EXPECT_EQ(r.stacks.why_none, "no Python frames: the memory of CPython 3.12.3 does not fit gpudiag (CPython 3.12 "
                               "layout): no thread state points back at its interpreter" + fix);
  r = walk_seed(seed("wrong-3.12-frame-field-added"));
  EXPECT_TRUE(r.stacks.threads.empty());
  EXPECT_EQ(r.stacks.why_none, "no Python frames: the memory of CPython 3.12.3 does not fit gpudiag (CPython 3.12 "
                               "layout): 1 of 1 frames' code objects are not code objects" + fix);
  // One minor version's image read with the other's layout: nothing that fits is found.
  for (auto [name, version] : {std::pair{"cpython-3.12", 0x030B02F0u}, std::pair{"cpython-3.11.2", 0x030C03F0u},
                               std::pair{"wrong-3.12-frame-field-added", 0x030B02F0u}}) {
    SCOPED_TRACE(name);
    r = walk_seed(seed(name), version);
    EXPECT_TRUE(r.stacks.threads.empty());
    EXPECT_EQ(r.stacks.why_none.rfind("no Python frames: ", 0), 0u) << r.stacks.why_none;
    EXPECT_NE(r.stacks.why_none.find(" does not fit gpudiag (CPython 3.1"), std::string::npos) << r.stacks.why_none;
  }
  // A right layout whose memory changes under the reader: the outer frame's code object
  // is no longer one (the frame at 0x10b00 now names the str at 0x11000). That ends the
  // thread's frames with a note; one check of two failing is not a wrong layout.
  std::vector<unsigned char> changed = seed("cpython-3.12");
  const std::uint64_t str = 0x11000;
  std::memcpy(changed.data() + 1 + (0x10b00 - 0x10000), &str, 8);
  r = walk_seed(changed);
  EXPECT_EQ(r.stacks.why_none, "");
  ASSERT_EQ(r.stacks.threads.size(), 1u);
  ASSERT_EQ(r.stacks.threads[0].frames.size(), 1u);
  EXPECT_EQ(r.stacks.threads[0].frames[0].line, 12);
  EXPECT_NE(r.stacks.threads[0].note.find("a frame's code object is not a code object"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag
