// A hang across nodes (issue 17.6): which nodes' reports are in, when a node stops
// waiting for them, and a node asked by another one (SIGURG) that dumps its tasks,
// once, and kills only after every node's report is in.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include "spank/watchdog/hang_spread.h"
#include "spank/watchdog/hang_watchdog.h"
#include "stacks/step_processes.h"

using namespace gpudiag;

TEST(HangSpread, SignalsTheStepThroughSlurmWithoutAShell) {
  EXPECT_EQ(spread_argv("12.3"), (std::vector<std::string>{"scancel", "--quiet", "--signal=URG", "12.3"}));
  // Ignored unless asked for: a program that never heard of gpudiag survives it.
  EXPECT_EQ(kSpreadSignal, SIGURG);
}

TEST(HangSpread, CountsNodesNotFiles) {
  EXPECT_EQ(reported_nodes({}), 0);
  EXPECT_EQ(reported_nodes({".", "..", "hang.declared", "nccl.n1.0.log", "fr_trace.rank0"}), 0);
  // A second report of one node (its name was taken) is still one node.
  EXPECT_EQ(reported_nodes({"hang.n1.txt", "hang.n2.txt", "hang.n2.k3x9qa.txt", "hang.declared"}), 2);
  EXPECT_EQ(reported_nodes({"hang..txt", "hang.txt", "hang.n3.txt.tmp", "xhang.n4.txt"}), 0);
}

TEST(HangSpread, WaitsForEveryNodeOrTheDeadline) {
  EXPECT_FALSE(stop_waiting(1, 3, 10, 20));
  EXPECT_TRUE(stop_waiting(3, 3, 10, 20));
  EXPECT_TRUE(stop_waiting(1, 3, 20, 20));
  EXPECT_TRUE(stop_waiting(1, 1, 0, 20));
}

TEST(HangSpread, OneRequestPerSignal) {
  catch_spread_signal();
  EXPECT_FALSE(take_spread_request());
  ASSERT_EQ(::raise(SIGURG), 0);
  EXPECT_TRUE(take_spread_request());
  EXPECT_FALSE(take_spread_request());
}

// Slurm does not signal processes named slurmstepd, which the relay is: the listener,
// a child with a name of its own, passes the signal on.
TEST(HangSpread, TheListenerPassesSlurmsSignalOnToTheRelay) {
  catch_spread_signal();
  take_spread_request();
  const pid_t listener = start_spread_listener();
  ASSERT_GT(listener, 0);
  std::string comm;
  for (int i = 0; i < 200 && comm != "gpudiag-hangsig\n"; ++i) {
    ::usleep(10000);
    std::ifstream f("/proc/" + std::to_string(listener) + "/comm");
    std::getline(f, comm);
    comm += "\n";
  }
  EXPECT_EQ(comm, std::string(kSpreadListenerName) + "\n");
  ASSERT_EQ(::kill(listener, SIGURG), 0);
  bool got = false;
  for (int i = 0; i < 200 && !got; ++i) {
    ::usleep(10000);
    got = take_spread_request();
  }
  EXPECT_TRUE(got);
  stop_spread_listener(listener);
  EXPECT_NE(::kill(listener, 0), 0);  // gone and reaped
}

namespace {

struct Dirs {
  std::string root, state, diag;
  Dirs() {
    char tmpl[] = "/tmp/gpudiag-spread-XXXXXX";
    root = ::mkdtemp(tmpl);
    state = root + "/state";
    diag = root + "/diag";
    ::mkdir(diag.c_str(), 0700);
  }
  ~Dirs() { std::system(("rm -rf '" + root + "'").c_str()); }
  void put(const std::string& name, const std::string& text) const { std::ofstream(diag + "/" + name) << text; }
  std::string read(const std::string& path) const {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

pid_t sleeper() {
  pid_t p = ::fork();
  if (p == 0) {
    ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return p;
}

bool ended(pid_t p) {
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(p, &status, WNOHANG) == p) return true;
    ::usleep(25000);
  }
  return false;
}

HangWatch node_of_two(const Dirs& d, const std::string& host) {
  HangWatch w;
  w.duration_s = 3600;  // this node is not silent: only the request makes it dump
  w.state_dir = d.state;
  w.diag_dir = d.diag;
  w.host = host;
  w.step = "5.0";
  w.nodes = 2;
  w.report_timeout_s = 2;
  w.kill_grace_s = 1;
  return w;
}

}  // namespace

TEST(HangSpread, AnAskedNodeDumpsNamesTheDeclaringNodeAndEndsItsTasks) {
  Dirs d;
  d.put("hang.declared", "n7\n");
  d.put("hang.n7.txt", "n7's report\n");
  pid_t child = sleeper();
  HangWatchdog dog(node_of_two(d, "n1"), child);
  ASSERT_TRUE(dog.active()) << dog.error();
  dog.tick();  // not silent, not asked: nothing
  EXPECT_FALSE(dog.ended_for_hang());
  ASSERT_EQ(::raise(SIGURG), 0);
  dog.tick();
  const std::string report = d.read(d.diag + "/hang.n1.txt");
  EXPECT_NE(report.find("gpudiag hang report: step 5.0 on n1, asked by the hang watchdog on n7 (another node of the step)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("program pid " + std::to_string(child)), std::string::npos) << report;
  EXPECT_TRUE(dog.ended_for_hang());
  EXPECT_TRUE(ended(child));
}

TEST(HangSpread, NothingIsKilledBeforeEveryNodesReportIsIn) {
  Dirs d;
  d.put("hang.declared", "n7\n");
  pid_t child = sleeper();
  HangWatch w = node_of_two(d, "n1");
  w.nodes = 3;
  w.report_timeout_s = 30;  // the deadline is far: only the reports can end the wait
  HangWatchdog dog(w, child);
  ASSERT_TRUE(dog.active()) << dog.error();
  ASSERT_EQ(::raise(SIGURG), 0);
  std::thread t([&] { dog.tick(); });
  // n1's own report lands first; n7's and n8's are not in yet.
  for (int i = 0; i < 400 && ::access((d.diag + "/hang.n1.txt").c_str(), F_OK) != 0; ++i) ::usleep(25000);
  d.put("hang.n7.txt", "n7\n");
  ::usleep(300000);
  EXPECT_EQ(::kill(child, 0), 0) << "killed while n8 had not reported";
  EXPECT_FALSE(dog.ended_for_hang()) << "the node's other relays would start their SIGKILL countdown";
  d.put("hang.n8.k2j4x0.txt", "n8\n");
  t.join();
  EXPECT_TRUE(dog.ended_for_hang());
  EXPECT_TRUE(ended(child));
}

TEST(HangSpread, TwoRequestsOnOneNodeWriteOneReport) {
  Dirs d;
  d.put("hang.n7.txt", "n7\n");
  pid_t a = sleeper(), b = sleeper();
  HangWatch wa = node_of_two(d, "n1"), wb = node_of_two(d, "n1");
  wb.rank = 1;
  wa.kill = wb.kill = false;  // report only: both relays live on to be asked again
  HangWatchdog first(wa, a), second(wb, b);
  ASSERT_TRUE(first.active() && second.active());
  ASSERT_EQ(::raise(SIGURG), 0);
  first.tick();
  ASSERT_EQ(::raise(SIGURG), 0);
  second.tick();
  ASSERT_EQ(::raise(SIGURG), 0);
  first.tick();
  // One report, and no second, random-suffixed one either.
  int reports = 0;
  DIR* dir = ::opendir(d.diag.c_str());
  ASSERT_NE(dir, nullptr);
  while (dirent* e = ::readdir(dir)) reports += std::string(e->d_name).rfind("hang.n1.", 0) == 0;
  ::closedir(dir);
  EXPECT_EQ(reports, 1);
  const std::string report = d.read(d.diag + "/hang.n1.txt");
  // No hang.declared: the report says who may have asked.
  EXPECT_NE(report.find("asked by SIGURG (another node's hang watchdog, or scancel --signal=URG)"), std::string::npos)
      << report;
  ::kill(a, SIGKILL);
  ::kill(b, SIGKILL);
  EXPECT_TRUE(ended(a) && ended(b));
}

// `gpudiag stacks` takes the relay's children for the program: the listener is not one.
TEST(HangSpread, TheListenerIsNotTakenForTheProgram) {
  std::vector<ListedPid> listed = {{2041, "1", "0", 0}, {2045, "1", "0", -1}, {2046, "1", "0", -1}};
  ProcTable table;
  for (auto [pid, ppid, comm] : {std::tuple<pid_t, pid_t, const char*>{2000, 1, "slurmstepd"},
                                 {2041, 2000, "slurmstepd"}, {2045, 2041, "python3"}, {2046, 2041, kSpreadListenerName}}) {
    ProcStat s;
    s.pid = pid;
    s.ppid = ppid;
    s.comm = comm;
    table[pid] = s;
  }
  auto roots = step_task_roots(listed, table, {"1", std::string("0")}, "");
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].pid, 2045);
}
