// Parts of the hang watchdog: durations and sizes, /proc/PID/stat, the silence rule, the
// state dir under a squatting neighbour, and the stack report (escaping, its deadline).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "util/duration.h"
#include "nodeinfo/proc_tree.h"
#include "spank/watchdog/hang_watchdog.h"
#include "stacks/stack_report.h"
#include "stacks/step_processes.h"

using namespace gpudiag;

TEST(Duration, Units) {
  EXPECT_EQ(parse_duration("90"), 90);
  EXPECT_EQ(parse_duration("20s"), 20);
  EXPECT_EQ(parse_duration("10m"), 600);
  EXPECT_EQ(parse_duration("1.5m"), 90);
  EXPECT_EQ(parse_duration("2h"), 7200);
  for (const char* bad : {"", "-5", "5x", "m", "1e400", "nan", " 5", "5 s"}) EXPECT_FALSE(parse_duration(bad)) << bad;
}

TEST(Size, Units) {
  EXPECT_EQ(parse_size("64M"), 64ull << 20);
  EXPECT_EQ(parse_size("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_size("512"), 512ull);
  for (const char* bad : {"", "-1G", "1Q", "G"}) EXPECT_FALSE(parse_size(bad)) << bad;
}

TEST(ProcStat, ParsesRealLinesWithAwkwardNames) {
  // A real line from this kernel, with a comm that holds ") (" and spaces.
  auto s = parse_proc_stat(
      "4242 (my (weird) name) S 4200 4242 4200 34816 4242 4194560 1163 0 0 0 150 25 0 0 20 0 3 0 "
      "1799519 28315648 3074 18446744073709551615 1 1 0 0 0 0 0 4096 65536 0 0 0 17 1 0 0 0 0 0\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->comm, "my (weird) name");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 4200);
  EXPECT_EQ(s->cpu_ticks, 175u);
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("12 (x) S"));
  EXPECT_FALSE(parse_proc_stat("abc (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13"));
}

TEST(ProcStat, OurOwnTree) {
  ProcTable t = snapshot_processes();
  ASSERT_TRUE(t.count(::getpid()));
  auto tree = process_tree(t, ::getppid());
  EXPECT_NE(std::find(tree.begin(), tree.end(), ::getpid()), tree.end());
  EXPECT_TRUE(process_tree(t, -5).empty());
}

TEST(NodeSilent, EveryTaskMustBeQuiet) {
  EXPECT_TRUE(node_silent(100, {70, 80}, 20));
  EXPECT_FALSE(node_silent(100, {70, 90}, 20));  // one task wrote 10 s ago
  EXPECT_FALSE(node_silent(100, {}, 20));
  EXPECT_FALSE(node_silent(100, {0}, 0));        // off
}

TEST(StepId, ParsesAndRejects) {
  auto a = parse_step_id("1234.0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->job, "1234");
  EXPECT_EQ(a->step, "0");
  EXPECT_FALSE(parse_step_id("1234")->step);
  for (const char* bad : {"", "12.x", "abc", ".1", "1.", "1;rm -rf"}) EXPECT_FALSE(parse_step_id(bad)) << bad;
}

TEST(Environ, FindsExactNames) {
  static const char kEnv[] = "SLURM_JOB_ID_X=9\0SLURM_JOB_ID=42\0EMPTY=\0";
  std::string env(kEnv, sizeof kEnv - 1);
  EXPECT_EQ(environ_value(env, "SLURM_JOB_ID"), "42");
  EXPECT_EQ(environ_value(env, "EMPTY"), "");
  EXPECT_FALSE(environ_value(env, "SLURM"));
}

TEST(StateDir, PicksTheFirstOwnedNameElseCreatesTheFirstFree) {
  using F = DirFact;
  EXPECT_EQ(pick_state_dir({F::missing, F::missing}).create, 0);
  EXPECT_EQ(pick_state_dir({F::ours, F::missing}).use, 0);
  // A squatted name is skipped; a name freed later loses to one the node already uses.
  EXPECT_EQ(pick_state_dir({F::taken, F::missing}).create, 1);
  EXPECT_EQ(pick_state_dir({F::missing, F::ours}).use, 1);
  auto none = pick_state_dir({F::taken, F::taken});
  EXPECT_EQ(none.use, -1);
  EXPECT_EQ(none.create, -1);
}

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpudiag-state-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

HangWatch watch_in(const std::string& state_dir) {
  HangWatch w;
  w.duration_s = 60;
  w.state_dir = state_dir;
  w.diag_dir = "/tmp";
  w.host = "h";
  w.step = "1.0";
  return w;
}

constexpr uid_t kSquatter = 65534;  // nobody: "another user"

}  // namespace

TEST(StateDir, AnotherUsersDirectoryAtTheNameDoesNotSwitchTheWatchdogOff) {
  TempDir t;
  const std::string base = t.path + "/gpudiag-0-1.0";
  ASSERT_EQ(::mkdir(base.c_str(), 0700), 0);
  ASSERT_EQ(::chown(base.c_str(), kSquatter, kSquatter), 0);
  HangWatchdog dog(watch_in(base), ::getpid());
  ASSERT_TRUE(dog.active()) << dog.error();
  EXPECT_EQ(dog.state_dir(), base + ".1");
  EXPECT_NE(dog.notice().find(base + " is taken by uid 65534"), std::string::npos) << dog.notice();
  // A second task of the node meets the first in the same place.
  HangWatch second = watch_in(base);
  second.rank = 1;
  HangWatchdog other(second, ::getppid());
  EXPECT_EQ(other.state_dir(), base + ".1");
  EXPECT_TRUE(other.notice().empty());
}

TEST(StateDir, LinksFilesAndOpenDirectoriesAreNotOurs) {
  TempDir t;
  const std::string base = t.path + "/s";
  const std::string mine = t.path + "/mine";
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(mine.c_str(), base.c_str()), 0);               // a link to a dir of ours
  ASSERT_EQ(::close(::open((base + ".1").c_str(), O_CREAT | O_WRONLY, 0600)), 0);  // a file
  ASSERT_EQ(::mkdir((base + ".2").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((base + ".2").c_str(), 0777), 0);                 // ours, but open to all
  HangWatchdog dog(watch_in(base), ::getpid());
  ASSERT_TRUE(dog.active()) << dog.error();
  EXPECT_EQ(dog.state_dir(), base + ".3");
}

// Issue 21 A2: a neighbour who takes all nine names weakens the watchdog (each task
// then watches itself alone), never switches it off.
TEST(StateDir, EveryNameTakenLeavesEachTaskWatchingItselfAndSaysWho) {
  TempDir t;
  const std::string base = t.path + "/s";
  for (int i = 0; i <= 8; ++i) {
    std::string n = i ? base + "." + std::to_string(i) : base;
    ASSERT_EQ(::mkdir(n.c_str(), 0700), 0);
    ASSERT_EQ(::chown(n.c_str(), kSquatter, kSquatter), 0);
  }
  HangWatchdog dog(watch_in(base), ::getpid());
  ASSERT_TRUE(dog.active()) << dog.error();
  EXPECT_EQ(dog.state_dir().rfind(base + ".", 0), 0u);
  EXPECT_EQ(dog.state_dir().size(), base.size() + 7) << dog.state_dir();  // base.XXXXXX
  struct stat st;
  ASSERT_EQ(::lstat(dog.state_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(dog.notice().find("taken by another user (uid 65534); the hang watchdog stays on, but task 0 watches "
                              "only its own output (in " + dog.state_dir() + ")"),
            std::string::npos)
      << dog.notice();
  HangWatch second = watch_in(base);
  second.rank = 1;
  HangWatchdog other(second, ::getppid());
  ASSERT_TRUE(other.active());
  EXPECT_NE(other.state_dir(), dog.state_dir());
}

TEST(EscapeControl, EscapesC0DelAndC1KeepsText) {
  EXPECT_EQ(escape_control("a\x1b[2Jb\x07"), "a\\x1b[2Jb\\x07");
  EXPECT_EQ(escape_control("x\x7fy"), "x\\x7fy");
  EXPECT_EQ(escape_control("csi\xc2\x9b" "31m"), "csi\\xc2\\x9b31m");
  EXPECT_EQ(escape_control("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 text stays
  EXPECT_EQ(escape_control("l1\n\tl2\r", true), "l1\n\tl2\\x0d");
  EXPECT_EQ(escape_control("l1\nl2"), "l1\\x0al2");
}

namespace {

// A child whose argv and name hold terminal escape sequences.
pid_t hostile_sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh\x1b]0;pwned\x07", "-c", "sleep 30; :", "\x1b[2J", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// A process stuck in vfork: its vfork child stopped itself, so the parent sits in D
// state and ptrace-based tools wait for ever. Returns the parent.
pid_t stuck_in_vfork() {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::vfork() == 0) {
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    ::_exit(0);
  }
  return pid;
}

void kill_tree(pid_t root) {
  ProcTable t = snapshot_processes();
  for (pid_t p : process_tree(t, root)) ::kill(p, SIGKILL);
  ::waitpid(root, nullptr, 0);
}

}  // namespace

TEST(StackReport, EscapesControlBytesInProcessText) {
  pid_t p = hostile_sleeper();
  ::usleep(200 * 1000);
  std::string report = stack_report("h", {{0, p}}, StackTools{}, 5);
  kill_tree(p);
  EXPECT_EQ(report.find('\x1b'), std::string::npos) << report;
  EXPECT_EQ(report.find('\x07'), std::string::npos) << report;
  EXPECT_NE(report.find("cmdline: sh\\x1b]0;pwned\\x07 -c sleep 30; : \\x1b[2J"), std::string::npos) << report;
}

TEST(StackReport, ProcessesThatCannotAnswerCostOneDeadline) {
  StackTools tools = find_stack_tools();
  if (tools.eu_stack.empty() && tools.gdb.empty()) GTEST_SKIP() << "no eu-stack or gdb";
  std::vector<TaskRoot> roots;
  for (int i = 0; i < 4; ++i) roots.push_back({i, stuck_in_vfork()});
  ::usleep(300 * 1000);
  const auto start = std::chrono::steady_clock::now();
  // 2 s per tool: one after the other, the four stuck parents alone would take 8 s.
  std::string report = stack_report("h", roots, tools, 2);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& r : roots) kill_tree(r.pid);
  EXPECT_LT(took, 6) << report;
  EXPECT_NE(report.find("no answer within 2 s"), std::string::npos) << report;
  EXPECT_EQ(report.find("slurmctld"), std::string::npos) << report;
  for (int i = 0; i < 4; ++i) EXPECT_NE(report.find("== task rank " + std::to_string(i)), std::string::npos);
}

TEST(StackReport, AnOverallDeadlineSkipsWhatItCannotReach) {
  StackTools tools = find_stack_tools();
  if (tools.eu_stack.empty() && tools.gdb.empty()) GTEST_SKIP() << "no eu-stack or gdb";
  std::vector<TaskRoot> roots;
  for (int i = 0; i < 10; ++i) roots.push_back({i, stuck_in_vfork()});
  ::usleep(300 * 1000);
  const auto start = std::chrono::steady_clock::now();
  std::string report = stack_report("h", roots, tools, 15, 2);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& r : roots) kill_tree(r.pid);
  EXPECT_LT(took, 5) << report;
  for (int i = 0; i < 10; ++i) EXPECT_NE(report.find("== task rank " + std::to_string(i)), std::string::npos);
}
