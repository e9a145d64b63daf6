#include <gtest/gtest.h>

#include "stacks/job_nodes.h"

using gpudiag::parse_squeue_node_count;

TEST(JobNodes, ParsesSqueueNodeCount) {
  auto n = parse_squeue_node_count("3\n", "7");
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(*n, 3);
  auto gone = parse_squeue_node_count("", "7");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().find("gpudiag: job 7 is not in Slurm's queue"), std::string::npos);
  EXPECT_FALSE(parse_squeue_node_count("3\n4\n", "7"));
  EXPECT_FALSE(parse_squeue_node_count("0", "7"));
  EXPECT_FALSE(parse_squeue_node_count("12345678", "7"));
  auto junk = parse_squeue_node_count("n[1-3]", "7");
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().find("squeue printed 'n[1-3]'"), std::string::npos);
}
