// The small helpers every tool shares (nodeinfo/text_lists.h, nodeinfo/this_host.h):
// one definition each, so the rules below hold everywhere they are used.
#include <gtest/gtest.h>

#include <unistd.h>

#include "util/text_lists.h"
#include "util/this_host.h"

using namespace gpudiag;

TEST(SmallHelpers, SplitListDropsEmptyItems) {
  EXPECT_EQ(split_list("ib,acs,,iommu,"), (std::vector<std::string>{"ib", "acs", "iommu"}));
  EXPECT_EQ(split_list(""), std::vector<std::string>{});
  EXPECT_EQ(split_list(",,,"), std::vector<std::string>{});
  EXPECT_EQ(split_list("a+b", '+'), (std::vector<std::string>{"a", "b"}));
}

TEST(SmallHelpers, JoinIsSplitsInverseForMessages) {
  EXPECT_EQ(join({"mlx5_0", "mlx5_1"}), "mlx5_0, mlx5_1");
  EXPECT_EQ(join({}), "");
  EXPECT_EQ(join(split_list("a,b,c"), ","), "a,b,c");
}

TEST(SmallHelpers, FirstLineTrimsAndBounds) {
  EXPECT_EQ(first_line("slurm_load_node error: Unable to contact slurm controller \r\nmore"),
            "slurm_load_node error: Unable to contact slurm controller");
  EXPECT_EQ(first_line(""), "");
  std::string longer(400, 'x');
  EXPECT_EQ(first_line(longer), std::string(300, 'x') + "...");
}

TEST(SmallHelpers, ShortNamesCutAtTheFirstDot) {
  EXPECT_EQ(short_name("gpu7.cluster.example.org"), "gpu7");
  EXPECT_EQ(short_name("gpu7"), "gpu7");
  EXPECT_EQ(short_name(""), "");
  char buf[256] = {};
  ASSERT_EQ(::gethostname(buf, sizeof buf - 1), 0);
  EXPECT_EQ(short_hostname(), short_name(buf));
}

TEST(SmallHelpers, SelfExeIsThisTestBinary) {
  EXPECT_NE(self_exe_path().find("gpudiag_unit_tests"), std::string::npos) << self_exe_path();
  EXPECT_EQ(self_exe_dir() + "/gpudiag_unit_tests", self_exe_path());
}

TEST(SmallHelpers, HostnameIsTheKernelsName) {
  char buf[256] = {};
  ASSERT_EQ(::gethostname(buf, sizeof buf - 1), 0);
  EXPECT_EQ(hostname(), buf);
  EXPECT_EQ(short_hostname(), short_name(hostname()));
}
