// --baseline's pure half: the model pattern and what looks wrong on a node's face.
#include <gtest/gtest.h>

#include "config/config.h"
#include "config/config_file.h"
#include "healthcheck/baseline/baseline_config.h"

namespace gpudiag {
namespace {

TEST(ModelPattern, KeepsTheModelWordOnly) {
  EXPECT_EQ(model_pattern("NVIDIA H100 80GB HBM3"), "*H100*");
  EXPECT_EQ(model_pattern("NVIDIA A100-SXM4-80GB"), "*A100*");
  EXPECT_EQ(model_pattern("NVIDIA GH200 480GB"), "*GH200*");
  EXPECT_EQ(model_pattern("NVIDIA GeForce RTX 4090"), "*4090*");
  EXPECT_EQ(model_pattern("Graphics Device"), "*Graphics Device*");
  EXPECT_EQ(model_pattern("Odd*[Name"), "*OddName*");
}

PcieLinkFact link(const std::string& name, int width, double speed) { return {"0000:00:00.0", name, width, speed}; }

TEST(DeriveBaseline, LowestPcieLinkIsWrittenAndTheSlowOneIsNamed) {
  BaselineFacts f;
  f.pci_gpus = 3;
  f.gpu_links = {link("GPU 0000:13:00.0", 16, 32), link("GPU 0000:14:00.0", 8, 32), link("GPU 0000:15:00.0", 16, 16)};
  f.iommu_mode = "off";
  Baseline b = derive_baseline(f, Config{});
  EXPECT_EQ(b.pcie.gpu_width, 8);
  EXPECT_EQ(b.pcie.gpu_speed, 16.0);
  EXPECT_FALSE(b.pcie.nic_width);
  ASSERT_EQ(b.doubts.size(), 2u);
  EXPECT_EQ(b.doubts[0], "GPU 0000:14:00.0 (0000:00:00.0) has a x8 PCIe link where its siblings have x16");
  EXPECT_EQ(b.doubts[1], "GPU 0000:15:00.0 (0000:00:00.0) has a 16 GT/s PCIe link where its siblings have 32 GT/s");
}

TEST(DeriveBaseline, MixedGpuModelsAndADriverShortOfPciAreDoubts) {
  BaselineFacts f;
  f.pci_gpus = 3;
  f.gpu_names = std::vector<std::string>{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"};
  Baseline b = derive_baseline(f, Config{});
  EXPECT_EQ(b.gpu_count, 3);
  ASSERT_EQ(b.doubts.size(), 2u);
  EXPECT_EQ(b.doubts[0], "the driver sees 2 GPU(s) but 3 are on PCI");
  EXPECT_EQ(b.doubts[1], "the GPUs are not all the same model: 1 x NVIDIA A100-SXM4-80GB, 1 x NVIDIA H100 80GB HBM3");
}

TEST(DeriveBaseline, LessThanTheLoadedConfigExpectsIsADoubt) {
  BaselineFacts f;
  f.pci_gpus = 7;
  Config loaded;
  loaded.gpu.count = 8;
  Baseline b = derive_baseline(f, loaded);
  EXPECT_EQ(b.gpu_count, 7);
  EXPECT_EQ(b.doubts, (std::vector<std::string>{"7 GPU(s) on PCI where the loaded config expects 8 (gpu.count)"}));
}

TEST(DeriveBaseline, ModelNotReadKeepsTheLoadedPattern) {
  BaselineFacts f;
  f.pci_gpus = 8;
  f.gpu_note = "not read: --fs-root is a copy of /sys";
  Config loaded;
  loaded.gpu.model = "*H200*";
  Baseline b = derive_baseline(f, loaded);
  EXPECT_EQ(b.gpu_model, "*H200*");
  EXPECT_EQ(b.gpu_note, "from the loaded config; the driver's name was not read: --fs-root is a copy of /sys");
  EXPECT_NE(baseline_yaml(b, f, loaded, "today").find(
                "  model: \"*H200*\"  # from the loaded config; the driver's name was not read"),
            std::string::npos);
}

// One top-level section of a written config, with its indented lines and comments.
std::string section_of(const std::string& yaml, const std::string& name) {
  const auto at = yaml.find("\n" + name + ":\n");
  if (at == std::string::npos) return "";
  std::size_t end = at + 1;
  do end = yaml.find('\n', end) + 1;
  while (end > 0 && end < yaml.size() && (yaml[end] == ' ' || yaml[end] == '#'));
  return yaml.substr(at + 1, (end == 0 ? yaml.size() : end) - at - 1);
}

TEST(BaselineYaml, KeepsTheTrustedGroupsOfTheLoadedConfig) {
  // Issue 30: a written baseline must not drop the admin's diag dir trust.
  Config loaded;
  loaded.plugin.diag_dir_trusted_groups = {"proj-ml", "cv_team"};
  BaselineFacts f;
  const std::string yaml = baseline_yaml(derive_baseline(f, loaded), f, loaded, "today");
  // Its plugin section, read back alone (the rest depends on the node's facts).
  auto back = parse_config(section_of(yaml, "plugin"), "baseline");
  ASSERT_TRUE(back) << back.error() << "\n" << yaml;
  EXPECT_EQ(back->plugin.diag_dir_trusted_groups, loaded.plugin.diag_dir_trusted_groups);
}

// Issue 32: the fabric test's RDMA floor from the GPU-fabric port's rate; the TCP floor
// and every other fabric key kept as loaded.
TEST(BaselineYaml, WritesTheRdmaFloorFromThePortRateAndKeepsTheFabricKeys) {
  Config loaded;
  loaded.fabric.action = "warn";
  loaded.fabric.min_gbps = 5;
  Baseline b = derive_baseline(BaselineFacts{}, loaded);
  b.ib.rate_gbps = 400;
  const std::string yaml = baseline_yaml(b, BaselineFacts{}, loaded, "today");
  auto back = parse_config(section_of(yaml, "fabric"), "baseline");
  ASSERT_TRUE(back) << back.error() << "\n" << yaml;
  EXPECT_EQ(back->fabric.rdma_min_gbps, 200);
  EXPECT_EQ(back->fabric.min_gbps, 5);
  EXPECT_EQ(back->fabric.action, "warn");
  EXPECT_EQ(back->fabric.nccl, "auto");
  // The node's rate decides, as for its other hardware keys; with no rate known, the
  // loaded floor stays and none is made up.
  loaded.fabric.rdma_min_gbps = 150;
  EXPECT_NE(baseline_yaml(b, BaselineFacts{}, loaded, "today").find("  rdma_min_gbps: 200\n"), std::string::npos);
  b.ib.rate_gbps.reset();
  EXPECT_NE(baseline_yaml(b, BaselineFacts{}, loaded, "today").find("  rdma_min_gbps: 150\n"), std::string::npos);
  loaded.fabric.rdma_min_gbps = 0;
  EXPECT_NE(baseline_yaml(b, BaselineFacts{}, loaded, "today").find("  rdma_min_gbps: 0\n"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag
