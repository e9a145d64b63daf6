// The small helpers every tool shares (util/: text_lists.h, this_host.h, duration.h):
// one definition each, so the rules below hold everywhere they are used.
#include <gtest/gtest.h>

#include <unistd.h>

#include "util/text_lists.h"
#include "util/duration.h"
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

// One byte formatter (util/duration.h) for the nccl check, the gdr check's memlock and
// the plugin's preflight: exact, so a limit just under what NCCL needs never reads as enough.
TEST(SmallHelpers, SizeTextIsExactInBinaryUnits) {
  EXPECT_EQ(size_text(1ull << 30), "1 GiB");
  EXPECT_EQ(size_text(8ull << 20), "8 MiB");
  EXPECT_EQ(size_text(64ull << 10), "64 KiB");
  EXPECT_EQ(size_text(1536), "1536 B");
  EXPECT_EQ(size_text(0), "0 B");
  EXPECT_EQ(size_text((1ull << 30) - 1), "1073741823 B");
  EXPECT_EQ(size_text(1536ull << 10), "1536 KiB");
  EXPECT_EQ(size_text(1ull << 50), "1024 TiB");
  for (unsigned long long v : {1ull, 1024ull, 3ull << 20, 5ull << 40})
    EXPECT_EQ(parse_size(size_text(v).erase(size_text(v).find(' '), 1)), v) << size_text(v);
}

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
