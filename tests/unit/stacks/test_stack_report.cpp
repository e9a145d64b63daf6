// The stack report: process text escaped, and one deadline for processes that cannot answer.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "nodeinfo/proc_tree.h"
#include "stacks/stack_report.h"

using namespace gpudiag;

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
