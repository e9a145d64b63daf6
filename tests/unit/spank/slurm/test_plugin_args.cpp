// The plugstack line's arguments (plugin_args): strict, absolute config path.
#include <gtest/gtest.h>

#include "spank/slurm/plugin_args.h"

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
