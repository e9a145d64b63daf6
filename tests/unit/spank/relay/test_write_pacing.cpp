// How long the node's relay thread waits before it writes again to a Slurm pipe it found
// full (spank/relay/write_pacing.h).
#include <gtest/gtest.h>

#include "spank/relay/write_pacing.h"

using namespace gpudiag;

namespace {
constexpr std::size_t kPipe = 64 * 1024;
}

TEST(WritePacing, PollsAtOnceUntilItLearnsOtherwise) {
  WritePacing p;
  EXPECT_EQ(p.wait(), 0);
}

TEST(WritePacing, WaitsLongerWhileItComesBackToAPipeStillMoreThanHalfFull) {
  WritePacing p;
  p.came_back(kPipe - 4096, kPipe);  // woken by one freed page
  EXPECT_EQ(p.wait(), WritePacing::kFirstWait);
  p.came_back(kPipe * 3 / 4, kPipe);
  EXPECT_EQ(p.wait(), 2 * WritePacing::kFirstWait);
  for (int i = 0; i < 40; ++i) p.came_back(kPipe, kPipe);  // a stopped srun
  EXPECT_EQ(p.wait(), WritePacing::kMaxWait) << "a line never waits more than kMaxWait longer";
}

TEST(WritePacing, KeepsAWaitThatFindsThePipeBetweenAQuarterAndHalfFull) {
  WritePacing p;
  for (int i = 0; i < 4; ++i) p.came_back(kPipe, kPipe);
  const double w = p.wait();
  p.came_back(kPipe / 2, kPipe);
  p.came_back(kPipe / 4, kPipe);
  p.came_back(kPipe / 3, kPipe);
  EXPECT_EQ(p.wait(), w);
}

TEST(WritePacing, WaitsLessWhenThePipeRunsLowAndNotAtAllWhenItRanDry) {
  WritePacing p;
  for (int i = 0; i < 4; ++i) p.came_back(kPipe, kPipe);
  const double w = p.wait();
  p.came_back(kPipe / 8, kPipe);
  EXPECT_EQ(p.wait(), w / 2);
  // The reader emptied the pipe and waited for the thread: it was too slow, so back to
  // polling for the first free page.
  p.came_back(0, kPipe);
  EXPECT_EQ(p.wait(), 0);
  // Halving below the first step also ends the waiting.
  p.came_back(kPipe, kPipe);
  p.came_back(kPipe / 8, kPipe);
  EXPECT_EQ(p.wait(), 0);
}

TEST(WritePacing, NoCapacityNoPacing) {
  WritePacing p;
  p.came_back(100, 0);  // not a pipe (a socket): nothing to learn from
  EXPECT_EQ(p.wait(), 0);
}
