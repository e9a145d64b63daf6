#include <gtest/gtest.h>

#include <fstream>

#include "nodeinfo/config.h"

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
}
