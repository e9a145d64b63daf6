// The plugstack line's arguments (plugin_args): strict, absolute config path.
#include <gtest/gtest.h>

#include "spank/slurm/plugin_args.h"
#include "spank/slurm/plugin_config.h"

using namespace gpudiag;

TEST(PluginArgs, Strict) {
  EXPECT_TRUE(parse_plugin_args({}));
  auto a = parse_plugin_args({"config=/etc/gpudiag/site.yaml"});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->config, "/etc/gpudiag/site.yaml");
  EXPECT_NE(parse_plugin_args({"cfg=/x"}).error().find("unknown plugstack argument 'cfg'"), std::string::npos);
  EXPECT_FALSE(parse_plugin_args({"config"}));
  EXPECT_FALSE(parse_plugin_args({"config=relative.yaml"}));
}

TEST(PluginArgs, ConfigCacheDirOrOff) {
  auto d = parse_plugin_args({});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->config_cache, kDefaultConfigCacheDir);
  auto a = parse_plugin_args({"config_cache=/var/cache/gpudiag"});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->config_cache, "/var/cache/gpudiag");
  auto off = parse_plugin_args({"config_cache=off"});
  ASSERT_TRUE(off);
  EXPECT_EQ(off->config_cache, "");
  auto rel = parse_plugin_args({"config_cache=run/gpudiag"});
  ASSERT_FALSE(rel);
  EXPECT_NE(rel.error().find("config_cache= needs an absolute path or off"), std::string::npos) << rel.error();
  EXPECT_FALSE(parse_plugin_args({"config_cache=/"}));
  EXPECT_NE(parse_plugin_args({"x=1"}).error().find("known: config=PATH, config_cache=DIR|off"), std::string::npos);
}
