// The pcie and gdr checks, and the no-config sibling rules, through the real
// gpudiag-health over the generated fixture trees.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "run_process.h"

namespace {

const std::string kBin = GPUDIAG_HEALTH_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;
const std::string kSiteConfig = GPUDIAG_SOURCE_DIR "/etc/gpudiag.yaml";

ProcessResult health(const std::string& variant, std::vector<std::string> extra) {
  std::vector<std::string> argv = {kBin, "--fs-root", kFixtures + "/" + variant};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_process(argv);
}

// A config file in the test's temp dir holding `text`.
std::string config(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name + ".yaml";
  std::ofstream(path) << text;
  return path;
}

nlohmann::json first_bad(const nlohmann::json& report, const std::string& check) {
  for (const auto& c : report["checks"])
    if (c["name"] == check)
      for (const auto& f : c["findings"])
        if (f["status"] != "ok") return f;
  return nullptr;
}

struct Case {
  std::string variant, check;
  int exit_code;
  std::string subject, status, message_part, hint_part;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << "/" << c.check; }

class PcieGdrVariant : public ::testing::TestWithParam<Case> {};

// Each sick variant through the site's example config and through --quick with no
// config at all: the defaults must catch it too.
TEST_P(PcieGdrVariant, GetsTheRightStatusSubjectAndHint) {
  const Case& c = GetParam();
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--config", kSiteConfig}, std::vector<std::string>{"--quick"}}) {
    auto args = how;
    args.insert(args.end(), {"--format", "json"});
    auto r = health(c.variant, args);
    ASSERT_EQ(r.exit_code, c.exit_code) << c.variant << " " << how[0] << "\n" << r.out << r.err;
    auto f = first_bad(nlohmann::json::parse(r.out), c.check);
    ASSERT_FALSE(f.is_null()) << r.out;
    EXPECT_EQ(f["subject"], c.subject);
    EXPECT_EQ(f["status"], c.status);
    EXPECT_NE(f["message"].get<std::string>().find(c.message_part), std::string::npos) << f.dump();
    EXPECT_NE(f["hint"].get<std::string>().find(c.hint_part), std::string::npos) << f.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, PcieGdrVariant,
    ::testing::Values(
        Case{"pcie-gpu-x8", "pcie", 2, "0000:13:00.0", "critical",
             "GPU 0000:13:00.0 runs at x8 at 32.0 GT/s, capable of x16 at 32.0 GT/s", "reseat the GPU"},
        Case{"pcie-nic-gen3", "pcie", 2, "0000:15:00.0", "critical",
             "NIC mlx5_0 (0000:15:00.0) runs at x16 at 8.0 GT/s, capable of x16 at 32.0 GT/s", "riser"},
        Case{"pcie-garbage", "pcie", 3, "0000:34:00.0", "unknown",
             "/sys/bus/pci/devices/0000:34:00.0/current_link_width: holds binary data", "lspci -vv -s 0000:34:00.0"},
        Case{"pcie-gpu-capped", "pcie", 1, "0000:b4:00.0", "warning",
             "capable of only x8 at 32.0 GT/s where its identical siblings (10de:2335) are capable of x16", "riser"},
        Case{"no-peermem", "gdr", 2, "nvidia_peermem", "critical",
             "nvidia_peermem is not loaded, and dma-buf needs Linux >= 5.12 with NVIDIA's open kernel module >= 515 "
             "(this node: Linux 5.10 with the proprietary kernel module 550.54.15)",
             "modprobe nvidia_peermem"},
        Case{"memlock-limited", "gdr", 1, "memlock", "warning", "the memlock limit is 64 KiB, not unlimited",
             "LimitMEMLOCK=infinity"}),
    [](const auto& param_info) {
      std::string name = param_info.param.variant;
      for (char& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(PcieGdrCli, HealthyAndDmaBufNodesPass) {
  for (const char* variant : {"healthy", "gdr-dmabuf", "pcie-gpu-idle"}) {
    auto r = health(variant, {"--quick", "--verbose"});
    EXPECT_EQ(r.exit_code, 0) << variant << "\n" << r.out << r.err;
  }
  auto r = health("healthy", {"--checks", "pcie,gdr", "--verbose"});
  EXPECT_NE(r.out.find("17 GPUs and NICs, 25 bridges, no link below its capability"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPUDirect RDMA through nvidia_peermem, memlock unlimited"), std::string::npos) << r.out;
  r = health("gdr-dmabuf", {"--checks", "gdr"});
  EXPECT_NE(r.out.find("GPUDirect RDMA through dma-buf"), std::string::npos) << r.out;
}

TEST(PcieGdrCli, GdrRequiredFalseMakesMissingAWarning) {
  auto r = health("no-peermem", {"--checks", "gdr", "--config", config("gdr-optional", "gdr:\n  required: false\n")});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
}

TEST(PcieGdrCli, PcieFloorsAndPolicyFromConfig) {
  // A site whose GPU slots are x8 by design.
  auto floor = config("pcie-x8", "pcie:\n  gpu_width: 8\n  gpu_speed: 32\n");
  EXPECT_EQ(health("pcie-gpu-x8", {"--checks", "pcie", "--config", floor}).exit_code, 0);
  auto warn = config("pcie-warn", "pcie:\n  policy: warning\n");
  EXPECT_EQ(health("pcie-gpu-x8", {"--checks", "pcie", "--config", warn}).exit_code, 1);
  auto typo = config("pcie-typo", "pcie:\n  gpu_widht: 8\n");
  auto r = health("healthy", {"--checks", "pcie", "--config", typo});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("gpudiag: " + typo + ":2: unknown key 'pcie.gpu_widht'"), std::string::npos) << r.err;
  auto bad = config("gdr-bad", "gdr:\n  required: maybe\n");
  r = health("healthy", {"--checks", "gdr", "--config", bad});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("'gdr.required' is 'maybe'"), std::string::npos) << r.err;
}

TEST(PcieGdrCli, PrometheusHasLinkWidthAndSpeedPerDevice) {
  auto r = health("pcie-gpu-x8", {"--checks", "pcie", "--format", "prometheus"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.out.find("# TYPE gpudiag_pcie_link_width gauge\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpudiag_pcie_link_width{bdf=\"0000:13:00.0\",device=\"gpu\"} 8\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gpudiag_pcie_link_speed_gts{bdf=\"0000:15:00.0\",device=\"mlx5_0\"} 32\n"),
            std::string::npos)
      << r.out;
}

// No ib.rate_gbps: the one 200 Gb/s port among 400 Gb/s siblings of the same model
// and link layer still warns.
TEST(PcieGdrCli, IbPortSlowerThanItsSiblingsWarnsWithoutARate) {
  auto r = health("rate-200", {"--quick", "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto f = first_bad(nlohmann::json::parse(r.out), "ib");
  ASSERT_FALSE(f.is_null()) << r.out;
  EXPECT_EQ(f["subject"], "mlx5_5:1");
  EXPECT_EQ(f["status"], "warning");
  EXPECT_EQ(f["message"], "mlx5_5 port 1 runs at 200 Gb/sec (4X HDR) where its identical siblings (MT4129 "
                          "InfiniBand) run at 400 Gb/sec (4X NDR)");
  auto no_rate = config("no-rate", "ib:\n  hcas: [\"mlx5_[0-7]\"]\n  count: 8\n  link_layer: InfiniBand\n");
  EXPECT_EQ(health("rate-200", {"--checks", "ib", "--config", no_rate}).exit_code, 1);
}

// An SR-IOV virtual function (a `physfn` link) has no link of its own: the kernel shows
// "Unknown" and 0 lanes, which is neither a fault nor unknown.
TEST(PcieGdrCli, VirtualFunctionsAreSkipped) {
  namespace fs = std::filesystem;
  char dir[] = "/tmp/gpudiag-vf-XXXXXX";
  const std::string root = ::mkdtemp(dir);
  fs::copy(kFixtures + "/healthy", root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const std::string vf = root + "/sys/bus/pci/devices/0000:16:00.0/";  // mlx5_1
  const std::string real = fs::canonical(vf).string() + "/";
  std::ofstream(real + "current_link_speed", std::ios::trunc) << "Unknown\n";
  std::ofstream(real + "current_link_width", std::ios::trunc) << "0\n";
  auto r = run_process({kBin, "--fs-root", root, "--checks", "pcie"});
  EXPECT_EQ(r.exit_code, 3) << "without physfn the garbage must be UNKNOWN\n" << r.out;
  fs::create_directory_symlink("../0000:15:00.0", real + "physfn");
  r = run_process({kBin, "--fs-root", root, "--checks", "pcie", "--verbose"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("0000:16:00.0"), std::string::npos) << r.out;
  fs::remove_all(root);
}

// A conventional PCI bridge has no link files at all: not a PCIe port, nothing to judge.
TEST(PcieGdrCli, BridgesWithoutLinkFilesAreNotPcie) {
  namespace fs = std::filesystem;
  char dir[] = "/tmp/gpudiag-pcibridge-XXXXXX";
  const std::string root = ::mkdtemp(dir);
  fs::copy(kFixtures + "/healthy", root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const std::string bridge = fs::canonical(root + "/sys/bus/pci/devices/0000:11:00.0").string() + "/";
  for (const char* f : {"current_link_speed", "current_link_width", "max_link_speed", "max_link_width"})
    fs::remove(bridge + f);
  auto r = run_process({kBin, "--fs-root", root, "--checks", "pcie", "--verbose"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("17 GPUs and NICs, 24 bridges"), std::string::npos) << r.out;
  // One link file left is a PCIe port with a broken file: UNKNOWN, never skipped.
  std::ofstream(bridge + "max_link_width") << "16\n";
  r = run_process({kBin, "--fs-root", root, "--checks", "pcie"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  fs::remove_all(root);
}

}  // namespace
