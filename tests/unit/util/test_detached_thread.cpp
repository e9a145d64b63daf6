// The detached thread srun's plugin starts: it runs, and it never sees srun's signals.
#include "util/detached_thread.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <future>

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
