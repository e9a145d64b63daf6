// gpudiag-health end to end: the real binary over the generated fixture trees.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "run_process.h"

namespace {

const std::string kBin = GPUDIAG_HEALTH_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;
const std::string kSiteConfig = GPUDIAG_SOURCE_DIR "/etc/gpudiag.yaml";

ProcessResult health(const std::string& variant, std::vector<std::string> extra = {}, bool with_config = true) {
  std::vector<std::string> argv = {kBin, "--fs-root", kFixtures + "/" + variant};
  if (with_config) {
    argv.push_back("--config");
    argv.push_back(kSiteConfig);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_process(argv);
}

nlohmann::json health_json(const std::string& variant, int expect_exit) {
  auto r = health(variant, {"--format", "json"});
  EXPECT_EQ(r.exit_code, expect_exit) << variant << "\n" << r.out << r.err;
  return nlohmann::json::parse(r.out);
}

// The finding about `subject` in check `check`, or null.
nlohmann::json finding(const nlohmann::json& report, const std::string& check, const std::string& subject) {
  for (const auto& c : report["checks"])
    if (c["name"] == check)
      for (const auto& f : c["findings"])
        if (f["subject"] == subject && f["status"] != "ok") return f;
  return nullptr;
}

struct Case {
  std::string variant;
  int exit_code;
  std::string check, subject, status, message_part, hint_part;
};

// Keeps ctest's test names readable (gtest would print the struct's bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << "/" << c.check; }

class Variant : public ::testing::TestWithParam<Case> {};

TEST_P(Variant, GetsTheRightStatusSubjectAndHint) {
  const Case& c = GetParam();
  auto report = health_json(c.variant, c.exit_code);
  auto f = finding(report, c.check, c.subject);
  ASSERT_FALSE(f.is_null()) << "no finding for " << c.subject << " in " << report.dump(2);
  EXPECT_EQ(f["status"], c.status);
  EXPECT_NE(f["message"].get<std::string>().find(c.message_part), std::string::npos) << f.dump();
  ASSERT_TRUE(f.contains("hint")) << f.dump();
  EXPECT_NE(f["hint"].get<std::string>().find(c.hint_part), std::string::npos) << f.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, Variant,
    ::testing::Values(
        Case{"port-down", 2, "ib", "mlx5_3:1", "critical", "mlx5_3 port 1 is DOWN (phys_state Polling)", "cable"},
        Case{"rate-200", 2, "ib", "mlx5_5:1", "critical", "200 Gb/sec (4X HDR) where 400 Gb/sec is expected",
             "cable"},
        Case{"ethernet", 2, "ib", "mlx5_6:1", "critical", "Ethernet where InfiniBand is expected", "mlxconfig"},
        Case{"acs-redirect", 2, "acs", "0000:32:00.0", "critical", "ReqRedir|CmpltRedir", "ECAP_ACS+0x6.w=0000"},
        Case{"iommu-translated", 1, "iommu", "iommu", "warning", "IOMMU is translated", "iommu=pt"},
        Case{"gpu-missing", 2, "gpu", "gpus", "critical", "7 NVIDIA GPU(s) on PCI where 8 are expected", "Xid 79"},
        Case{"nonroot-config", 3, "acs", "0000:12:00.0", "unknown", "first 64 bytes", "run as root"},
        Case{"garbage-empty", 3, "ib", "mlx5_2:1", "unknown", "/sys/class/infiniband/mlx5_2/ports/1/state: file is empty",
             "driver"},
        Case{"garbage-binary", 3, "ib", "mlx5_4:1", "unknown", "/sys/class/infiniband/mlx5_4/ports/1/rate: holds binary",
             "driver"},
        Case{"garbage-huge", 3, "ib", "mlx5_1:1", "unknown", "/sys/class/infiniband/mlx5_1/ports/1/phys_state: file is larger",
             "driver"},
        Case{"garbage-symlink", 3, "ib", "mlx5_7:1", "unknown",
             "/sys/class/infiniband/mlx5_7/ports/1/link_layer: dangling symlink", "driver"},
        Case{"garbage-symlink", 3, "gpu", "0000:13:00.0", "warning",
             "/sys/bus/pci/devices/0000:13:00.0/numa_node: dangling symlink", "lspci"},
        Case{"garbage-pci", 3, "acs", "0000:92:00.0", "unknown", "extended capability list loops", "lspci"},
        Case{"garbage-pci", 3, "gpu", "0000:14:00.0", "unknown", "/sys/bus/pci/devices/0000:14:00.0/vendor: holds binary",
             "lspci"}),
    [](const auto& param_info) {
      std::string name = param_info.param.variant + "_" + param_info.param.check;
      for (char& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(HealthCli, HealthyFixtureIsOk) {
  auto r = health("healthy");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(": OK"), std::string::npos);
  auto j = health_json("healthy", 0);
  EXPECT_EQ(j["status"], "ok");
  std::vector<std::string> names;
  for (const auto& c : j["checks"]) names.push_back(c["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"ib", "acs", "iommu", "gpu", "xid", "ibcounters", "pcie", "gdr"}));
}

TEST(HealthCli, WithoutConfigOnlyBrokenOnItsFace) {
  EXPECT_EQ(health("healthy", {}, false).exit_code, 0);
  // No expected rate, but 200 Gb/s among identical 400 Gb/s siblings: a warning.
  EXPECT_EQ(health("rate-200", {}, false).exit_code, 1);
  EXPECT_EQ(health("port-down", {}, false).exit_code, 2);
  EXPECT_EQ(health("acs-redirect", {}, false).exit_code, 2);
}

TEST(HealthCli, JsonHasLocality) {
  auto j = health_json("healthy", 0);
  nlohmann::json gpu;
  for (const auto& c : j["checks"])
    if (c["name"] == "gpu") gpu = c;
  ASSERT_TRUE(gpu.contains("details")) << gpu.dump(2);
  const auto& g0 = gpu["details"]["gpus"][0];
  EXPECT_EQ(g0["bdf"], "0000:13:00.0");
  EXPECT_EQ(g0["numa"], 0);
  EXPECT_EQ(g0["switch"], "0000:11:00.0");
  EXPECT_EQ(g0["nics"], (nlohmann::json{"mlx5_0", "mlx5_1"}));
  const auto& g7 = gpu["details"]["gpus"][7];
  EXPECT_EQ(g7["numa"], 1);
  EXPECT_EQ(g7["nics"], (nlohmann::json{"mlx5_6", "mlx5_7"}));
}

TEST(HealthCli, NhcFormat) {
  auto ok = health("healthy", {"--format", "nhc"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.out, "");
  auto bad = health("port-down", {"--format", "nhc"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.out, "gpudiag: mlx5_3 port 1 is DOWN (phys_state Polling)\n");
}

TEST(HealthCli, PrometheusFormat) {
  auto r = health("port-down", {"--format", "prometheus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("gpudiag_check_status{check=\"ib\"} 2\n"), std::string::npos);
  EXPECT_NE(r.out.find("gpudiag_status 2\n"), std::string::npos);
}

TEST(HealthCli, QuickAndChecksSelect) {
  auto j = nlohmann::json::parse(health("port-down", {"--format", "json", "--checks", "iommu,gpu"}).out);
  EXPECT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(health("port-down", {"--quick"}).exit_code, 2);
}

TEST(HealthCli, VerboseShowsWhatIsFine) {
  auto r = health("healthy", {"--verbose"});
  EXPECT_NE(r.out.find("mlx5_0 port 1 ACTIVE LinkUp 400 Gb/sec (4X NDR) InfiniBand"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shares it with mlx5_0, mlx5_1"), std::string::npos) << r.out;
}

TEST(HealthCli, BadUsageIsUnknownWithAClearMessage) {
  auto r = health("healthy", {"--checks", "ib,foo"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("unknown check 'foo'"), std::string::npos) << r.err;
  r = health("healthy", {"--format", "xml"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r.err;
  r = run_process({kBin, "--fs-root", "/nonexistent/root"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--fs-root /nonexistent/root: not a directory"), std::string::npos) << r.err;
  r = run_process({kBin, "--config", "/nonexistent/gpudiag.yaml"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("/nonexistent/gpudiag.yaml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("check --config"), std::string::npos) << r.err;
  r = health("healthy", {"--quick", "--checks", "ib"});
  EXPECT_EQ(r.exit_code, 3);
  r = health("healthy", {"--no-such-flag"});
  EXPECT_EQ(r.exit_code, 3);
  r = health("port-down", {"--force"});  // --force only overrides the drain breaker
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--force goes with --drain"), std::string::npos) << r.err;
}

TEST(HealthCli, BrokenConfigNamesFileAndLine) {
  const std::string path = ::testing::TempDir() + "/broken-gpudiag.yaml";
  std::ofstream(path) << "ib:\n  count: 8\n  rate: 400\n";
  auto r = run_process({kBin, "--config", path, "--fs-root", kFixtures + "/healthy"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find(path + ":3: unknown key 'ib.rate'"), std::string::npos) << r.err;
}

}  // namespace

// --config-keys prints the loader's own declarations: one row per key, each with a value
// type and help, the newest sections included.
TEST(HealthCli, ConfigKeysListsEveryKeyAsATableRow) {
  auto r = run_process({kBin, "--config-keys"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("| key | value | what for |\n| --- | --- | --- |\n", 0), 0u) << r.out;
  for (const char* key : {"health.timeout", "drain.jitter", "fabric.timeout", "ib.roles[].role", "ib.storage.rate_gbps",
                          "plugin.diag_dir_trusted_groups", "plugin.hang.duration", "nccl.min_bandwidth[].busbw"})
    EXPECT_NE(r.out.find(std::string("\n| `") + key + "` | "), std::string::npos) << key;
  std::size_t rows = 0, from = 0;
  while ((from = r.out.find('\n', from)) != std::string::npos) {
    ++from;
    if (from < r.out.size()) {
      const std::string row = r.out.substr(from, r.out.find('\n', from) - from);
      EXPECT_EQ(std::count(row.begin(), row.end(), '|'), 4) << row;  // key, value, help: none holds a '|'
      ++rows;
    }
  }
  EXPECT_GT(rows, 100u);
}
