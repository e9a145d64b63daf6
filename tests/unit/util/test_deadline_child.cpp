// File work in a child with a deadline (util/deadline_child.h): the answer, the
// deadline, and that a child left behind holds nothing of the caller's.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/deadline_child.h"

using namespace gpudiag;

TEST(DeadlineChild, BringsBackWhatTheChildWrites) {
  auto a = run_in_child_until(30, 5, [](int out) { write_whole(out, "hello world", 11); });
  ASSERT_TRUE(a.finished) << a.error;
  EXPECT_EQ(a.bytes, "hello");  // at most max_bytes
}

TEST(DeadlineChild, GivesUpAtTheDeadlineAndKillsTheChild) {
  auto a = run_in_child_until(0.3, 100, [&](int out) {
    // Tell the test who we are, then wait as a hung filesystem would.
    const pid_t me = ::getpid();
    write_whole(out, &me, sizeof me);
    for (;;) ::pause();
  });
  EXPECT_FALSE(a.finished);
  EXPECT_NE(a.error.find("no answer within"), std::string::npos) << a.error;
  ASSERT_EQ(a.bytes.size(), sizeof(pid_t));
  pid_t child;
  std::memcpy(&child, a.bytes.data(), sizeof child);
  // SIGKILLed (and perhaps reaped already): it ends without this test's help.
  int status = 0;
  const pid_t reaped = ::waitpid(child, &status, 0);
  if (reaped == child) EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  else EXPECT_EQ(errno, ECHILD);
}

TEST(DeadlineChild, TheChildHoldsNoFdOfTheCaller) {
  // A pipe someone reads to the end (NHC reading our stdout) must not stay open in a
  // child that a frozen filesystem holds.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);  // not close-on-exec, as an inherited stdout is not
  auto a = run_in_child_until(30, 100, [&](int out) {
    char verdict[3] = {::fcntl(p[0], F_GETFD) < 0 ? 'c' : 'o', ::fcntl(p[1], F_GETFD) < 0 ? 'c' : 'o',
                       ::fcntl(1, F_GETFD) < 0 ? 'x' : 'n'};
    write_whole(out, verdict, 3);
    // stdout is /dev/null: this goes nowhere the caller reads.
    write_whole(1, "noise", 5);
  });
  ASSERT_TRUE(a.finished) << a.error;
  EXPECT_EQ(a.bytes, "ccn");
  ::close(p[0]);
  ::close(p[1]);
}
