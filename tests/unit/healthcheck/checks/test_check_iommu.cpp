#include <gtest/gtest.h>

#include "healthcheck/checks/check_iommu.h"

using namespace gpudiag;

TEST(Iommu, ModeFromGroupsAndCmdline) {
  EXPECT_EQ(iommu_mode({}), "off");
  EXPECT_EQ(iommu_mode({1, {"identity", "identity"}, "", {}}), "passthrough");
  EXPECT_EQ(iommu_mode({1, {"identity", "DMA-FQ"}, "", {}}), "translated");
  EXPECT_EQ(iommu_mode({1, {}, "root=/dev/sda iommu=pt", {}}), "passthrough");
  EXPECT_EQ(iommu_mode({1, {}, "intel_iommu=on", {}}), "translated");
}

TEST(Iommu, CmdlineArgs) {
  auto a = iommu_cmdline_args("BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt quiet iommu.strict=0 xiommu=1");
  EXPECT_EQ(a, (std::vector<std::string>{"intel_iommu=on", "iommu=pt", "iommu.strict=0"}));
}

TEST(Iommu, DefaultPolicyWarnsOnTranslated) {
  IommuSettings s;
  auto r = evaluate_iommu({1, {"DMA-FQ"}, "intel_iommu=on", {}}, s);
  EXPECT_EQ(r.status, Status::warning);
  EXPECT_NE(r.findings[0].hint.find("iommu=pt"), std::string::npos);
  EXPECT_EQ(evaluate_iommu({1, {"identity"}, "iommu=pt", {}}, s).status, Status::ok);
  EXPECT_EQ(evaluate_iommu({}, s).status, Status::ok);
}

TEST(Iommu, PolicyFromConfig) {
  IommuSettings s;
  s.allow = {"passthrough"};
  s.policy = Policy::critical;
  EXPECT_EQ(evaluate_iommu({}, s).status, Status::critical);
  s.policy = Policy::ignore;
  EXPECT_EQ(evaluate_iommu({}, s).status, Status::ok);
}

TEST(Iommu, UnreadableGroupIsUnknown) {
  auto r = evaluate_iommu({1, {}, "", {"/sys/kernel/iommu_groups/3/type: holds binary data, not text"}}, {});
  EXPECT_EQ(r.status, Status::unknown);
}
