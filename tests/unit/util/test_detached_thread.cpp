// The plugin's threads: the detached one srun starts runs and never sees srun's signals;
// the one slurmstepd joins runs to its end, blocks every signal, and allocates off the main
// heap.
#include "util/detached_thread.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

using namespace gpudiag;

TEST(DetachedThread, RunsTheBodyWithEverySignalBlocked) {
  std::promise<bool> blocked;
  auto got = blocked.get_future();
  sigset_t before, after;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &before);
  const std::string error = start_detached_thread([&blocked] {
    sigset_t mask;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    blocked.set_value(sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1 &&
                      sigismember(&mask, SIGUSR1) == 1);
  });
  ASSERT_EQ(error, "");
  ASSERT_EQ(got.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_TRUE(got.get());
  // The caller's own mask is as it was.
  ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
  EXPECT_EQ(sigismember(&before, SIGINT), sigismember(&after, SIGINT));
  EXPECT_EQ(sigismember(&before, SIGTERM), sigismember(&after, SIGTERM));
}

TEST(OwnArenaThread, RunsTheBodyToItsEndWithEverySignalBlocked) {
  bool ran = false, blocked = false;
  ASSERT_TRUE(run_in_own_arena([&] {
    sigset_t mask;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    blocked = sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1;
    ran = true;
  }));
  // Joined: what the body did is done when it returns.
  EXPECT_TRUE(ran);
  EXPECT_TRUE(blocked);
  sigset_t after;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
  EXPECT_EQ(sigismember(&after, SIGINT), 0);
}

#if !defined(__SANITIZE_ADDRESS__)  // ASan's allocator has no arenas
TEST(OwnArenaThread, WhatTheBodyAllocatesIsNotOnTheMainHeap) {
  // The main heap lies below the program break; a thread's arena is a mapping of its own.
  void* main_heap = std::malloc(64);
  void* own = nullptr;
  ASSERT_TRUE(run_in_own_arena([&] { own = std::malloc(64); }));
  const void* brk = ::sbrk(0);
  EXPECT_LT(main_heap, brk);
  EXPECT_GT(own, brk);
  std::free(own);  // a chunk of another arena is freed like any other
  std::free(main_heap);
}
#endif

// No thread can start (here: the process limit, which binds no root, so as nobody): the
// caller learns it, and the body has not run, so the caller runs it in place.
TEST(OwnArenaThread, WithoutAThreadSaysSoAndRunsNothing) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) ::_exit(10);
    struct rlimit none {1, 1};
    if (::setrlimit(RLIMIT_NPROC, &none) != 0) ::_exit(11);
    bool ran = false;
    if (run_in_own_arena([&] { ran = true; })) ::_exit(12);
    ::_exit(ran ? 13 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10, 11: setup; 12: a thread started; 13: the body ran";
}

// The thread's stack is unmapped after the join: glibc would keep a stack of its own making,
// a mapping every later fork of slurmstepd carries (adversary review 7).
TEST(OwnArenaThread, LeavesNoStackBehind) {
  std::uintptr_t on_stack = 0;
  ASSERT_TRUE(run_in_own_arena([&] {
    int local = 0;
    on_stack = reinterpret_cast<std::uintptr_t>(&local);
  }));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream(line) >> std::hex >> from >> dash >> to;
    EXPECT_FALSE(on_stack >= from && on_stack < to) << "still mapped: " << line;
  }
}
