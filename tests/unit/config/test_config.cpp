#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "config/config.h"
#include "config/config_file.h"

using namespace gpudiag;

TEST(Config, ExampleFileParses) {
  auto cfg = load_config_file(GPUDIAG_SOURCE_DIR "/etc/gpudiag.yaml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->ib.count, 8);
  EXPECT_EQ(cfg->ib.rate_gbps, 400);
  EXPECT_EQ(cfg->ib.link_layer, "InfiniBand");
  EXPECT_EQ(cfg->gpu.count, 8);
  EXPECT_EQ(cfg->acs.policy, Policy::critical);
  EXPECT_EQ(cfg->iommu.allow, (std::vector<std::string>{"off", "passthrough"}));
}

TEST(Config, EmptyMeansDefaults) {
  auto cfg = parse_config("", "t.yaml");
  ASSERT_TRUE(cfg);
  EXPECT_FALSE(cfg->ib.count);
  EXPECT_EQ(cfg->health.drain_prefix, "gpudiag:");
  EXPECT_EQ(cfg->iommu.policy, Policy::warning);
}

TEST(Config, UnknownKeyNamesFileLineAndKey) {
  auto cfg = parse_config("ib:\n  count: 8\n  rte_gbps: 400\n", "/etc/gpudiag/gpudiag.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.error().rfind("gpudiag: /etc/gpudiag/gpudiag.yaml:3: unknown key 'ib.rte_gbps'", 0), 0u) << cfg.error();
  EXPECT_NE(cfg.error().find("rate_gbps"), std::string::npos);
}

TEST(Config, UnknownTopLevelKey) {
  auto cfg = parse_config("gpus:\n  count: 8\n", "c.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().find("c.yaml:1: unknown key 'gpus'"), std::string::npos) << cfg.error();
}

TEST(Config, WrongTypeNamesKeyAndLine) {
  auto cfg = parse_config("gpu:\n  count: eight\n", "c.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().find("c.yaml:2: 'gpu.count' must be a whole number, not 'eight'"), std::string::npos)
      << cfg.error();
  EXPECT_FALSE(parse_config("ib:\n  hcas: mlx5_0\n", "c"));           // not a list
  EXPECT_FALSE(parse_config("ib: [1, 2]\n", "c"));                    // not a map
  EXPECT_FALSE(parse_config("ib:\n  rate_gbps: -5\n", "c"));          // out of range
  EXPECT_FALSE(parse_config("acs:\n  policy: maybe\n", "c"));         // not a choice
  EXPECT_FALSE(parse_config("iommu:\n  allow: [on]\n", "c"));         // not a mode
  EXPECT_FALSE(parse_config("health:\n  checks: [ib, foo]\n", "c"));  // not a check
  EXPECT_FALSE(parse_config("- a\n- b\n", "c"));                       // top level a list
}

TEST(Config, InvalidYamlNamesLine) {
  auto cfg = parse_config("ib:\n  count: [8\n", "c.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().find("c.yaml:"), std::string::npos);
  EXPECT_NE(cfg.error().find("not valid YAML"), std::string::npos);
}

TEST(Config, MissingFileSaysHowToFix) {
  auto cfg = load_config_file("/nonexistent/gpudiag.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().find("/nonexistent/gpudiag.yaml"), std::string::npos);
  EXPECT_FALSE(load_config_file("/"));  // a directory is not a config
}

TEST(Config, OutputPrefixSettings) {
  auto cfg = parse_config("plugin:\n  prefix: always\n  prefix_format: '<{host}/{rank}>'\n", "c");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->plugin.prefix, "always");
  EXPECT_EQ(cfg->plugin.prefix_format, "<{host}/{rank}>");
  EXPECT_EQ(parse_config("", "c")->plugin.prefix, "auto");
  auto bad = parse_config("plugin:\n  prefix: sometimes\n", "c");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("plugin.prefix"), std::string::npos) << bad.error();
  EXPECT_FALSE(parse_config("plugin:\n  prefix_format: \"a\\tb\"\n", "c"));            // control character
  EXPECT_FALSE(parse_config("plugin:\n  prefix_format: " + std::string(200, 'x') + "\n", "c"));  // too long
  // Issue 30: the groups whose project dirs may hold diag dirs.
  auto trusted = parse_config("plugin:\n  diag_dir_trusted_groups: [proj-ml, cv_team]\n", "c");
  ASSERT_TRUE(trusted) << trusted.error();
  EXPECT_EQ(trusted->plugin.diag_dir_trusted_groups, (std::vector<std::string>{"proj-ml", "cv_team"}));
  EXPECT_TRUE(parse_config("plugin:\n  prefix: auto\n", "c")->plugin.diag_dir_trusted_groups.empty());
  EXPECT_FALSE(parse_config("plugin:\n  diag_dir_trusted_groups: proj-ml\n", "c"));       // not a list
  EXPECT_FALSE(parse_config("plugin:\n  diag_dir_trusted_groups: ['a b']\n", "c"));      // not a name
  EXPECT_FALSE(parse_config("plugin:\n  diag_dir_trusted_groups: [\"a\\tb\"]\n", "c"));  // control character
}

TEST(Config, GpuP2pAndNcclSections) {
  auto cfg = parse_config(
      "gpu:\n  count: 8\n  model: '*H100*'\n  probe_timeout: 20s\n  libraries: {nvml: /opt/nvml.so}\n"
      "p2p: {expect: nvlink, bandwidth: true, min_bandwidth: 100}\n"
      "nccl:\n  bytes: 512M\n  iters: 10\n  min_bandwidth:\n    - {model: '*H100*', gpus: 8, busbw: 360}\n"
      "    - {model: '*', algbw: 50}\n",
      "t.yaml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->gpu.model, "*H100*");
  EXPECT_EQ(cfg->gpu.probe_timeout_s, 20);
  EXPECT_EQ(cfg->gpu.libraries.nvml, "/opt/nvml.so");
  EXPECT_EQ(cfg->p2p.expect, "nvlink");
  EXPECT_TRUE(cfg->p2p.bandwidth);
  EXPECT_EQ(cfg->nccl.bytes, 512ull << 20);
  ASSERT_EQ(cfg->nccl.min_bandwidth.size(), 2u);
  EXPECT_EQ(cfg->nccl.min_bandwidth[0].gpus, 8);
  EXPECT_EQ(cfg->nccl.min_bandwidth[0].line, 11);
  EXPECT_EQ(cfg->nccl.min_bandwidth[1].algbw_gbps, 50);
}

TEST(Config, GpuSectionErrorsNameKeyAndLine) {
  struct Bad {
    const char* yaml;
    const char* message;
  };
  for (const Bad& b : {Bad{"p2p: {expect: pcie}\n", "t.yaml:1: 'p2p.expect' is 'pcie' (expected one of: ok, nvlink, any)"},
                       Bad{"nccl:\n  min_bandwidth:\n    - {model: x}\n", "t.yaml:3: a 'nccl.min_bandwidth' entry needs busbw"},
                       Bad{"nccl: {bytes: lots}\n", "t.yaml:1: 'nccl.bytes' must be a size"},
                       Bad{"gpu: {libraries: {nvml: libnvidia-ml.so.1}}\n", "'gpu.libraries.nvml' must be an absolute path"},
                       Bad{"gpu: {probe_timeout: 0s}\n", "'gpu.probe_timeout' must be at least 1s"}}) {
    auto cfg = parse_config(b.yaml, "t.yaml");
    ASSERT_FALSE(cfg) << b.yaml;
    EXPECT_NE(cfg.error().find(b.message), std::string::npos) << cfg.error();
  }
}

// Missing, not a file, and unreadable each have their own fix, so each is named; a
// FIFO must not hang the reader (srun would hang with it).
TEST(Config, UnreadableFilesSayWhy) {
  auto missing = load_config_file("/nonexistent/gpudiag.yaml");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), "gpudiag: cannot read config /nonexistent/gpudiag.yaml: No such file or directory");
  auto dir = load_config_file("/tmp");
  ASSERT_FALSE(dir);
  EXPECT_EQ(dir.error(), "gpudiag: cannot read config /tmp: not a regular file");
  std::string fifo = testing::TempDir() + "gpudiag-config-fifo-" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = load_config_file(fifo);
  ::unlink(fifo.c_str());
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("not a regular file"), std::string::npos);
}

TEST(Config, GpuThrottleAndReplayLimit) {
  auto dflt = parse_config("", "t.yaml");
  ASSERT_TRUE(dflt);
  EXPECT_EQ(dflt->gpu.throttle, Policy::warning);
  EXPECT_EQ(dflt->gpu.pcie_replay_max, 100u);
  auto cfg = parse_config("gpu:\n  throttle: critical\n  pcie_replay_max: 5000\n", "t.yaml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->gpu.throttle, Policy::critical);
  EXPECT_EQ(cfg->gpu.pcie_replay_max, 5000u);
  auto bad = parse_config("gpu:\n  throttle: loud\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "gpudiag: t.yaml:2: 'gpu.throttle' is 'loud' (expected one of: critical, warning, ignore)");
  bad = parse_config("gpu:\n  pcie_replay_max: -1\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("'gpu.pcie_replay_max' must be a whole number"), std::string::npos) << bad.error();
}

TEST(Config, PcieAndGdrSections) {
  auto c = parse_config("pcie:\n  policy: warning\n  gpu_width: 8\n  gpu_speed: 16\n  nic_width: 16\n  nic_speed: 32\n"
                        "gdr:\n  required: false\n",
                        "t.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->pcie.policy, Policy::warning);
  EXPECT_EQ(c->pcie.gpu_width, 8);
  EXPECT_DOUBLE_EQ(*c->pcie.gpu_speed, 16.0);
  EXPECT_EQ(c->pcie.nic_width, 16);
  EXPECT_DOUBLE_EQ(*c->pcie.nic_speed, 32.0);
  EXPECT_EQ(c->gdr.required, "false");
  auto d = parse_config("", "t.yaml");
  EXPECT_EQ(d->pcie.policy, Policy::critical);
  EXPECT_FALSE(d->pcie.gpu_width);
  EXPECT_EQ(d->gdr.required, "auto");

  auto typo = parse_config("pcie:\n  nic_widht: 8\n", "t.yaml");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().find("gpudiag: t.yaml:2: unknown key 'pcie.nic_widht'"), std::string::npos) << typo.error();
  auto wide = parse_config("pcie:\n  gpu_width: 64\n", "t.yaml");
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().find("'pcie.gpu_width' must be between 1 and 32"), std::string::npos) << wide.error();
  auto speed = parse_config("pcie:\n  gpu_speed: fast\n", "t.yaml");
  ASSERT_FALSE(speed);
  EXPECT_NE(speed.error().find("'pcie.gpu_speed' must be a number"), std::string::npos) << speed.error();
  auto gdr = parse_config("gdr:\n  required: sometimes\n", "t.yaml");
  ASSERT_FALSE(gdr);
  EXPECT_NE(gdr.error().find("'gdr.required' is 'sometimes' (expected one of: auto, true, false)"), std::string::npos);
  EXPECT_FALSE(parse_config("gdr:\n  peermem: true\n", "t.yaml"));
}

TEST(Config, IbRolesAndPerRoleExpectations) {
  auto cfg = parse_config(
      "ib:\n  rate_gbps: 400\n  link_layer: Unknown\n  roles:\n    - {hca: \"mlx5_[12]\", role: storage}\n"
      "    - {netdev: \"enp*np1\", port: 1, role: frontend}\n  storage: {rate_gbps: 200, link_layer: InfiniBand}\n"
      "  frontend:\n    rate_gbps: 100\n",
      "t.yaml");
  ASSERT_TRUE(cfg) << cfg.error();
  ASSERT_EQ(cfg->ib.roles.size(), 2u);
  EXPECT_EQ(cfg->ib.roles[0].hca, "mlx5_[12]");
  EXPECT_EQ(cfg->ib.roles[0].role, PortRole::storage);
  EXPECT_EQ(cfg->ib.roles[0].line, 5);
  EXPECT_EQ(cfg->ib.roles[1].netdev, "enp*np1");
  EXPECT_EQ(cfg->ib.roles[1].port, 1);
  EXPECT_EQ(cfg->ib.roles[1].role, PortRole::frontend);
  EXPECT_EQ(cfg->ib.expect_for(PortRole::fabric).link_layer, "Unknown");
  EXPECT_EQ(cfg->ib.expect_for(PortRole::storage).rate_gbps, 200);
  EXPECT_EQ(cfg->ib.expect_for(PortRole::frontend).rate_gbps, 100);
  EXPECT_FALSE(cfg->ib.expect_for(PortRole::unused).rate_gbps);
}

TEST(Config, IbRolesErrorsNameTheKey) {
  auto bad = parse_config("ib:\n  roles:\n    - {hca: mlx5_1, role: compute}\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("t.yaml:3: 'ib.roles[].role' is 'compute' (expected one of: fabric, storage, frontend, "
                             "unused)"),
            std::string::npos)
      << bad.error();
  bad = parse_config("ib:\n  roles:\n    - {role: storage}\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("needs hca or netdev"), std::string::npos) << bad.error();
  bad = parse_config("ib:\n  storage: {speed: 200}\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("unknown key 'ib.storage.speed'"), std::string::npos) << bad.error();
}

namespace {

// {"ib.roles[].hca", "x"} -> "{ib: {roles: [{hca: x}]}}": one key set, everything else absent.
std::string yaml_setting(const std::string& dotted, const std::string& value) {
  std::string open, close;
  std::size_t from = 0;
  for (;;) {
    const std::size_t dot = dotted.find('.', from);
    std::string seg = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (dot == std::string::npos) return "{" + open + seg + ": " + value + close + "}";
    const bool list = seg.size() > 2 && seg.compare(seg.size() - 2, 2, "[]") == 0;
    if (list) seg.resize(seg.size() - 2);
    open += seg + (list ? ": [{" : ": {");
    close = (list ? "}]" : "}") + close;
    from = dot + 1;
  }
}

}  // namespace

TEST(ConfigKeys, EveryKeyHasATypeAndHelpAndOneName) {
  const auto& keys = config_keys();
  ASSERT_FALSE(keys.empty());
  std::vector<std::string> seen;
  for (const auto& k : keys) {
    EXPECT_FALSE(k.type.empty()) << k.name;
    EXPECT_FALSE(k.help.empty()) << k.name << " has no help";
    EXPECT_EQ(std::count(seen.begin(), seen.end(), k.name), 0) << k.name << " is declared twice";
    seen.push_back(k.name);
  }
  // The sections added since the list was first written are declared like the rest.
  for (const char* name : {"drain.max_nodes", "drain.max_share", "drain.jitter", "fabric.action", "fabric.seconds",
                           "fabric.slow_fraction", "fabric.min_gbps", "fabric.timeout", "fabric.rdma", "fabric.rdma_min_gbps",
                           "fabric.rdma_library", "fabric.nccl", "ib.roles", "ib.roles[].hca",
                           "ib.roles[].netdev", "ib.roles[].port", "ib.roles[].role", "ib.storage.rate_gbps",
                           "ib.storage.link_layer", "ib.frontend.rate_gbps", "ib.frontend.link_layer",
                           "plugin.diag_dir_trusted_groups", "plugin.hang.duration", "nccl.min_bandwidth[].busbw"})
    EXPECT_EQ(std::count(seen.begin(), seen.end(), name), 1) << name;
}

// Every declared key gets past the unknown-key check (its value may still be wrong).
TEST(ConfigKeys, EveryDeclaredKeyIsAllowed) {
  for (const auto& k : config_keys()) {
    const std::string text = yaml_setting(k.name, "x");
    auto cfg = parse_config(text, "k.yaml");
    if (!cfg) {
      EXPECT_EQ(cfg.error().find("unknown key"), std::string::npos) << text << ": " << cfg.error();
    }
  }
}

// The unknown-key check of each mapping knows exactly the keys declared under it, in order.
TEST(ConfigKeys, UnknownKeyCheckListsExactlyTheDeclaredKeys) {
  const auto& keys = config_keys();
  auto expect_known = [&](const std::string& prefix) {
    std::string known;
    for (const auto& k : keys)
      if (k.name.rfind(prefix, 0) == 0 && k.name.find('.', prefix.size()) == std::string::npos)
        known += (known.empty() ? "" : ", ") + k.name.substr(prefix.size());
    const std::string stray = prefix + "zz_undeclared";
    auto cfg = parse_config(yaml_setting(stray, "1"), "k.yaml");
    ASSERT_FALSE(cfg) << stray;
    EXPECT_EQ(cfg.error(), "gpudiag: k.yaml:1: unknown key '" + stray + "' (known: " + known + ")");
  };
  expect_known("");
  int mappings = 0;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (keys[i].mapping) {
      ++mappings;
      // Its keys follow it: "ib.storage.rate_gbps", or "ib.roles[].hca" for each entry of a list.
      ASSERT_LT(i + 1, keys.size());
      const bool list = keys[i + 1].name.rfind(keys[i].name + "[].", 0) == 0;
      expect_known(keys[i].name + (list ? "[]." : "."));
    }
  EXPECT_GE(mappings, 20);
}
