// The fleet as it is (issue 35): the real gpudiag-health over trees of the common GPU node
// families (tests/fixtures/nodes.yaml `families:`). A healthy node of every family is OK
// with no config and with its own --baseline; each sick variant is flagged and named,
// with no config where the fault shows on its face and always with the baseline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "run_process.h"

namespace {

namespace fs = std::filesystem;

const std::string kBin = GPUDIAG_HEALTH_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;

const std::vector<std::string> kFamilies = {"p5-ubuntu", "p5-al2", "dgx-h100", "dgx-h100-basepod", "baremetal-roce"};

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpudiag-fleet-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static ProcessResult quick(const std::string& variant, const std::string& config = "",
                             std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {kBin, "--quick", "--fs-root", kFixtures + "/" + variant};
    if (!config.empty()) argv.insert(argv.end(), {"--config", config});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv);
  }
  // Only the named checks.
  static ProcessResult checks(const std::string& variant, const std::string& names, const std::string& config = "",
                              std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {kBin, "--checks", names, "--fs-root", kFixtures + "/" + variant};
    if (!config.empty()) argv.insert(argv.end(), {"--config", config});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv);
  }
  // The family's own baseline, saved as a config.
  std::string baseline(const std::string& family) {
    auto b = run_process({kBin, "--baseline", "--fs-root", kFixtures + "/" + family});
    EXPECT_EQ(b.exit_code, 0) << family << "\n" << b.out << b.err;
    fs::path p = dir_ / (family + ".yaml");
    std::ofstream(p) << b.out;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(Fleet, HealthyNodeOfEveryFamilyIsOkWithoutConfigAndWithItsBaseline) {
  for (const auto& family : kFamilies) {
    auto bare = quick(family);
    EXPECT_EQ(bare.exit_code, 0) << family << " with no config\n" << bare.out << bare.err;
    const std::string cfg = baseline(family);
    auto own = quick(family, cfg);
    EXPECT_EQ(own.exit_code, 0) << family << " with its baseline\n" << own.out << own.err;
    // NHC prints nothing for a healthy node: nothing to drain.
    EXPECT_EQ(quick(family, "", {"--format", "nhc"}).out, "") << family;
  }
}

struct Sick {
  std::string family, variant;
  int bare_exit;         // with no config: 2 where it is broken on its face, 1 or 0 where it needs the baseline
  std::string named;     // in the NHC line with the baseline
};

void PrintTo(const Sick& s, std::ostream* os) { *os << s.variant; }

class FleetSick : public Fleet, public ::testing::WithParamInterface<Sick> {};

TEST_P(FleetSick, IsFlaggedAndNamed) {
  const Sick& s = GetParam();
  auto bare = quick(s.variant);
  EXPECT_EQ(bare.exit_code, s.bare_exit) << s.variant << " with no config\n" << bare.out;
  auto r = quick(s.variant, baseline(s.family), {"--format", "nhc"});
  EXPECT_EQ(r.exit_code, 2) << s.variant << " with its family's baseline\n" << r.out << r.err;
  EXPECT_NE(r.out.find(s.named), std::string::npos) << s.variant << "\n" << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Families, FleetSick,
    ::testing::Values(
        Sick{"p5-ubuntu", "p5-ubuntu-port-down", 2, "rdmap21s0 port 1 is DOWN (phys_state Disabled)"},
        Sick{"p5-ubuntu", "p5-ubuntu-rate-down", 1, "rdmap22s0 port 1 runs at 25 Gb/sec (1X EDR) where 100 Gb/sec"},
        Sick{"p5-ubuntu", "p5-ubuntu-pcie-nic", 2, "NIC rdmap36s0 (0000:24:00.0) runs at x16 at 16.0 GT/s"},
        Sick{"p5-ubuntu", "p5-ubuntu-efa-missing", 0, "rdmap165s0 is missing"},
        Sick{"p5-al2", "p5-al2-port-down", 2, "rdmap21s0 port 1 is DOWN"},
        Sick{"p5-al2", "p5-al2-rate-down", 1, "rdmap22s0 port 1 runs at 25 Gb/sec"},
        Sick{"p5-al2", "p5-al2-pcie-nic", 2, "NIC rdmap36s0 (0000:24:00.0) runs at x16 at 16.0 GT/s"},
        Sick{"p5-al2", "p5-al2-efa-missing", 0, "rdmap165s0 is missing"},
        Sick{"p5-al2", "p5-al2-no-gdr", 2, "reports gdr 0 on 32 of 32 device(s)"},
        Sick{"dgx-h100", "dgx-h100-port-down", 2, "mlx5_4 port 1 is DOWN (phys_state Polling)"},
        Sick{"dgx-h100", "dgx-h100-rate-down", 1, "mlx5_10 port 1 runs at 200 Gb/sec (4X HDR) where 400 Gb/sec"},
        Sick{"dgx-h100", "dgx-h100-pcie-nic", 2, "NIC mlx5_5 (0000:5e:00.0) runs at x16 at 16.0 GT/s"},
        Sick{"dgx-h100", "dgx-h100-storage-down", 0, "mlx5_7 port 1 (storage) is DOWN (phys_state Polling)"},
        Sick{"dgx-h100-basepod", "dgx-h100-basepod-port-down", 2, "mlx5_0 port 1 is DOWN (phys_state Polling)"},
        Sick{"dgx-h100-basepod", "dgx-h100-basepod-rate-down", 1, "mlx5_9 port 1 runs at 200 Gb/sec (4X HDR)"},
        Sick{"dgx-h100-basepod", "dgx-h100-basepod-pcie-nic", 2, "NIC mlx5_3 (0000:40:00.0) runs at x16 at 16.0 GT/s"},
        Sick{"baremetal-roce", "baremetal-roce-port-down", 2, "mlx5_7 port 1 is DOWN (phys_state Disabled)"},
        Sick{"baremetal-roce", "baremetal-roce-rate-down", 1, "mlx5_12 port 1 runs at 100 Gb/sec (4X EDR) where 200"},
        Sick{"baremetal-roce", "baremetal-roce-pcie-nic", 2, "NIC mlx5_2 (0000:14:00.0) runs at x16 at 16.0 GT/s"}),
    [](const auto& param_info) {
      std::string name = param_info.param.variant;
      for (char& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// What the baseline of each family says: roles recorded, uncabled ports left out, one
// link layer and rate floor per role.
TEST_F(Fleet, BaselineRecordsRolesAndPerRoleFloors) {
  auto b = run_process({kBin, "--baseline", "--fs-root", kFixtures + "/dgx-h100"});
  for (const char* want : {"  rate_gbps: 400", "  link_layer: InfiniBand\n", "    - {hca: \"mlx5_1\", role: storage}",
                           "    - {hca: \"mlx5_2\", role: frontend}", "  storage:\n    rate_gbps: 200",
                           "  frontend:\n    rate_gbps: 100", "    link_layer: Ethernet\n"})
    EXPECT_NE(b.out.find(want), std::string::npos) << want << "\n" << b.out;
  auto bp = run_process({kBin, "--baseline", "--fs-root", kFixtures + "/dgx-h100-basepod"});
  EXPECT_NE(bp.out.find("    - {hca: \"mlx5_7\", role: unused}  # DOWN (Polling) here"), std::string::npos) << bp.out;
  EXPECT_EQ(bp.out.find("WARNING: this node did not look healthy"), std::string::npos) << bp.out;
  auto p5 = run_process({kBin, "--baseline", "--fs-root", kFixtures + "/p5-ubuntu"});
  EXPECT_NE(p5.out.find("  count: 32\n  rate_gbps: 100"), std::string::npos) << p5.out;
  EXPECT_NE(p5.out.find("  link_layer: Unknown"), std::string::npos) << p5.out;
  // The bare-metal front-end ports: the fabric's model and link layer, told apart by where they sit.
  auto bm = run_process({kBin, "--baseline", "--fs-root", kFixtures + "/baremetal-roce"});
  EXPECT_NE(bm.out.find("  rate_gbps: 200"), std::string::npos) << bm.out;
  EXPECT_NE(bm.out.find("    - {hca: \"mlx5_0\", role: frontend}"), std::string::npos) << bm.out;
}

// EFA's "Unknown" link layer is what its driver always says: never UNKNOWN, and the fix
// texts name EFA's tools, not mlx5's.
TEST_F(Fleet, EfaIsJudgedByWhatItReports) {
  auto r = checks("p5-ubuntu", "ib,gdr", "", {"--format", "json", "--verbose"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const auto& c : j["checks"]) {
    for (const auto& f : c["findings"]) EXPECT_EQ(f["status"], "ok") << f.dump();
    if (c["name"] == "ib") {
      ASSERT_EQ(c["details"]["ports"].size(), 32u);
      EXPECT_EQ(c["details"]["ports"][0]["role"], "fabric");
      EXPECT_EQ(c["details"]["ports"][0]["provider"], "efa");
    }
    if (c["name"] == "gdr") {
      EXPECT_EQ(c["summary"], "GPUDirect RDMA through the efa driver, memlock unlimited");
    }
  }
  auto down = checks("p5-ubuntu-port-down", "ib");
  EXPECT_NE(down.out.find("ibv_devinfo -d rdmap21s0"), std::string::npos) << down.out;
  EXPECT_EQ(down.out.find("mlx"), std::string::npos) << down.out;
}

// The role is in the metrics (an info metric to join on) and in the lines NHC shows.
TEST_F(Fleet, ReportsCarryTheRole) {
  auto p = checks("dgx-h100", "ib", "", {"--format", "prometheus"});
  for (const char* want : {"gpudiag_ib_port_role{hca=\"mlx5_0\",port=\"1\",role=\"fabric\",provider=\"mlx5\"} 1\n",
                           "gpudiag_ib_port_role{hca=\"mlx5_1\",port=\"1\",role=\"storage\",provider=\"mlx5\"} 1\n",
                           "gpudiag_ib_port_role{hca=\"mlx5_2\",port=\"1\",role=\"frontend\",provider=\"mlx5\"} 1\n"})
    EXPECT_NE(p.out.find(want), std::string::npos) << want << "\n" << p.out;
  auto v = checks("dgx-h100-basepod", "ib", "", {"--verbose"});
  EXPECT_NE(v.out.find("mlx5_1 port 1 (unused) is DOWN (phys_state Polling): not checked"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("mlx5_2 port 1 (frontend) ACTIVE LinkUp 100 Gb/sec (4X EDR) Ethernet"), std::string::npos)
      << v.out;
}

// An admin states what the node cannot tell: here the storage Ethernet port as storage,
// with its own floor.
TEST_F(Fleet, ConfigRolesOverrideTheNode) {
  fs::path cfg = dir_ / "roles.yaml";
  std::ofstream(cfg) << "ib:\n  roles:\n    - {netdev: \"enp*s0f1np1\", role: storage}\n"
                        "  storage:\n    rate_gbps: 200\n";
  auto r = checks("dgx-h100", "ib", cfg.string(), {"--format", "nhc"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("(storage) runs at 100 Gb/sec (4X EDR) where 200 Gb/sec is expected"), std::string::npos)
      << r.out;
}

}  // namespace
