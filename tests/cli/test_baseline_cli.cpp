// gpudiag-health --baseline end to end: the real binary reads a fixture node, its output
// is loaded back with --config, and the checks judge the sick variants with it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "run_process.h"

namespace {

namespace fs = std::filesystem;

const std::string kBin = GPUDIAG_HEALTH_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;
const std::string kSiteConfig = GPUDIAG_SOURCE_DIR "/etc/gpudiag.yaml";

class Baseline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpudiag-baseline-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessResult baseline(const std::string& variant, const std::string& config = "") {
    std::vector<std::string> argv = {kBin, "--baseline", "--fs-root", kFixtures + "/" + variant};
    if (!config.empty()) argv.insert(argv.end(), {"--config", config});
    return run_process(argv);
  }
  std::string save(const std::string& text, const std::string& name) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // The loader on this branch may not know helper A's `pcie:` keys yet; once both
  // branches are merged it does, and the block is loaded as written.
  std::string loadable(const std::string& yaml) {
    auto probe = run_process({kBin, "--config", save("pcie:\n  policy: critical\n", "pcie-probe.yaml"), "--checks",
                              "iommu", "--fs-root", kFixtures + "/healthy"});
    if (probe.err.find("unknown key 'pcie'") == std::string::npos) return save(yaml, "baseline.yaml");
    return save(without_block(yaml, "pcie"), "baseline.yaml");
  }
  static std::string without_block(const std::string& yaml, const std::string& key) {
    std::istringstream in(yaml);
    std::string line, out;
    bool skipping = false;
    while (std::getline(in, line)) {
      if (!line.empty() && line[0] != ' ' && line[0] != '#') skipping = line == key + ":";
      if (!skipping) out += line + "\n";
    }
    return out;
  }
  ProcessResult quick(const std::string& variant, const std::string& config) {
    return run_process({kBin, "--quick", "--fs-root", kFixtures + "/" + variant, "--config", config});
  }
  fs::path dir_;
};

// The lines of the top-level block `key`, without comments.
std::vector<std::string> block(const std::string& yaml, const std::string& key) {
  std::istringstream in(yaml);
  std::string line;
  std::vector<std::string> out;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') inside = line == key + ":";
    else if (inside && line.rfind("  ", 0) == 0 && line.find_first_not_of(' ') != std::string::npos &&
             line[line.find_first_not_of(' ')] != '#')
      out.push_back(line.substr(0, line.find("  #", 2)));
  }
  return out;
}

TEST_F(Baseline, HealthyBaselinePassesOnItsNodeAndEachSickVariantFails) {
  for (const std::string& config : {std::string(), kSiteConfig}) {
    auto b = baseline("healthy", config);
    ASSERT_EQ(b.exit_code, 0) << config << "\n" << b.out << b.err;
    EXPECT_EQ(b.err, "");
    const std::string cfg = loadable(b.out);
    auto ok = quick("healthy", cfg);
    EXPECT_EQ(ok.exit_code, 0) << b.out << ok.out << ok.err;
    for (const std::string variant :
         {"port-down", "rate-200", "ethernet", "iommu-translated", "gpu-missing", "acs-redirect", "sick",
          "pcie-gpu-x8", "pcie-nic-gen3", "no-peermem", "xid-79"}) {
      auto r = quick(variant, cfg);
      EXPECT_NE(r.exit_code, 0) << variant << " with " << (config.empty() ? "no config" : config) << "\n" << r.out;
      EXPECT_NE(r.exit_code, 3) << variant << ": the baseline must load\n" << r.out << r.err;
    }
  }
}

// With no config at all these are at most a warning (the sibling rule flags a slower or
// odd port); the baseline of a healthy sibling makes them CRITICAL.
TEST_F(Baseline, CatchesWhatNoConfigMisses) {
  const std::string cfg = loadable(baseline("healthy").out);
  for (const std::string variant : {"rate-200", "ethernet", "gpu-missing"}) {
    EXPECT_LT(run_process({kBin, "--quick", "--fs-root", kFixtures + "/" + variant}).exit_code, 2) << variant;
    EXPECT_EQ(quick(variant, cfg).exit_code, 2) << variant;
  }
  auto r = quick("rate-200", cfg);
  EXPECT_NE(r.out.find("mlx5_5 port 1 runs at 200 Gb/sec (4X HDR) where 400 Gb/sec is expected"), std::string::npos)
      << r.out;
}

TEST_F(Baseline, WritesWhatTheNodeHas) {
  auto b = baseline("healthy");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(b.out.rfind("# gpudiag.yaml read from gpu-node-01 on ", 0), 0u) << b.out;
  EXPECT_EQ(block(b.out, "ib"),
            (std::vector<std::string>{
                "  hcas: [\"mlx5_0\", \"mlx5_1\", \"mlx5_2\", \"mlx5_3\", \"mlx5_4\", \"mlx5_5\", \"mlx5_6\", \"mlx5_7\"]",
                "  count: 8", "  rate_gbps: 400", "  link_layer: InfiniBand", "  exclude: [\"mlx5_bond_*\"]"}))
      << b.out;
  EXPECT_NE(b.out.find("\ngpu:\n  count: 8  # NVIDIA GPUs on PCI\n  # model: not read: --fs-root is a copy of /sys"),
            std::string::npos)
      << b.out;
  EXPECT_EQ(block(b.out, "iommu"), (std::vector<std::string>{"  allow: [\"off\"]", "  policy: warning"})) << b.out;
}

// The keys agreed with helper A, who implements the pcie check: exactly these.
TEST_F(Baseline, PcieBlockHasExactlyTheAgreedKeys) {
  auto b = baseline("healthy");
  EXPECT_EQ(block(b.out, "pcie"), (std::vector<std::string>{"  policy: critical", "  gpu_width: 16", "  gpu_speed: 32",
                                                             "  nic_width: 16", "  nic_speed: 32"}))
      << b.out;
}

// An idle GPU's link drops to 2.5 GT/s: the floor written is what the link trains to.
TEST_F(Baseline, IdleGpuLinkWritesItsTrainableSpeed) {
  auto b = baseline("pcie-gpu-idle");
  EXPECT_EQ(block(b.out, "pcie"), (std::vector<std::string>{"  policy: critical", "  gpu_width: 16", "  gpu_speed: 32",
                                                             "  nic_width: 16", "  nic_speed: 32"}))
      << b.out;
}

// A baseline is a config a site copies: everything not about the hardware is kept.
TEST_F(Baseline, KeepsTheLoadedConfig) {
  auto first = baseline("healthy", kSiteConfig);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  for (const char* kept : {"  drain_prefix: \"gpudiag:\"\n", "    NCCL_SOCKET_IFNAME: \"^docker,lo,virbr\"\n",
                           "    NCCL_IB_HCA: \"auto\"\n", "    - {model: \"*H100*\", gpus: 8, busbw: 360}\n",
                           "  prefix_format: \"[{host}:{rank}]\"\n", "    heartbeat_timeout: 300s\n",
                           "    rdzv_join_timeout: 600s\n", "  checks: [\"ib\", \"acs\", \"iommu\", \"gpu\", \"xid\", \"ibcounters\", \"pcie\", \"gdr\"]\n"})
    EXPECT_NE(first.out.find(kept), std::string::npos) << kept << "\n" << first.out;
  // Read back and written again, nothing changes but the header.
  const std::string cfg = loadable(first.out);
  auto second = baseline("healthy", cfg);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto body = [](const std::string& y) { return y.substr(y.find("\nhealth:")); };
  EXPECT_EQ(body(without_block(second.out, "pcie")), body(without_block(first.out, "pcie")));
}

struct Sick {
  const char* variant;
  const char* doubt;
};

TEST_F(Baseline, SickNodeStillGetsABaselineButWarnsAndExits1) {
  for (const Sick& s : {Sick{"port-down", "mlx5_3:1 is not up (DOWN)"},
                        Sick{"rate-200", "mlx5_5:1 runs at 200 Gb/sec (4X HDR) where its siblings reach 400 Gb/sec"},
                        Sick{"ethernet", "mlx5_6:1 is Ethernet where its siblings are InfiniBand"}}) {
    auto b = baseline(s.variant);
    EXPECT_EQ(b.exit_code, 1) << s.variant << "\n" << b.err;
    EXPECT_EQ(b.err.rfind("gpudiag: --baseline: gpu-node-01 does not look healthy", 0), 0u) << b.err;
    EXPECT_NE(b.err.find(s.doubt), std::string::npos) << b.err;
    EXPECT_NE(b.out.find("# WARNING: this node did not look healthy"), std::string::npos) << b.out;
    EXPECT_NE(b.out.find("\nib:\n"), std::string::npos) << b.out;
  }
  // Below what the loaded config expects: the site has seen more than this node has.
  auto b = baseline("gpu-missing", kSiteConfig);
  EXPECT_EQ(b.exit_code, 1) << b.err;
  EXPECT_NE(b.err.find("7 GPU(s) on PCI where the loaded config expects 8 (gpu.count)"), std::string::npos) << b.err;
}

TEST_F(Baseline, IsGivenAlone) {
  auto r = run_process({kBin, "--baseline", "--quick", "--fs-root", kFixtures + "/healthy"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--baseline prints a config: give it alone"), std::string::npos) << r.err;
}

// What a hostile tree names (an HCA called `evil"name`, a hostname with a line of YAML in
// it) stays a string or a comment: the baseline still loads and means what the node has.
TEST_F(Baseline, HostileNamesCannotInjectYaml) {
  const fs::path root = dir_ / "tree";
  const fs::path port = root / "sys/class/infiniband/evil\"name/ports/1";
  fs::create_directories(port);
  fs::create_directories(root / "proc/sys/kernel");
  fs::create_directories(root / "sys/bus/pci/devices");
  std::ofstream(port / "state") << "4: ACTIVE\n";
  std::ofstream(port / "phys_state") << "5: LinkUp\n";
  std::ofstream(port / "rate") << "400 Gb/sec (4X NDR)\n";
  std::ofstream(port / "link_layer") << "InfiniBand\n";
  std::ofstream(root / "proc/sys/kernel/hostname") << "node\nib:\n  count: 99\n";
  auto b = run_process({kBin, "--baseline", "--fs-root", root.string()});
  EXPECT_NE(b.out.find("  hcas: [\"evil\\\"name\"]\n  count: 1\n"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("\nib:\n  count: 99"), std::string::npos) << b.out;
  auto r = run_process({kBin, "--checks", "ib", "--fs-root", root.string(), "--config", loadable(b.out)});
  EXPECT_EQ(r.exit_code, 0) << b.out << r.out << r.err;
}

}  // namespace
