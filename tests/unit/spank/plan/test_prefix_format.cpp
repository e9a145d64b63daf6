// The tag of a task's lines (plugin.prefix_format).
#include <gtest/gtest.h>

#include "spank/plan/prefix_format.h"

using namespace gpudiag;

TEST(PrefixFormat, Placeholders) {
  EXPECT_EQ(expand_prefix_format("[{host}:{rank}]", "gpu7", 12, 4), "[gpu7:12]");
  EXPECT_EQ(expand_prefix_format("{host}/{local_rank}|{rank}", "n", 1, 0), "n/0|1");
  EXPECT_EQ(expand_prefix_format("{nope}{", "n", 1, 0), "{nope}{");
}
