#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "config/config_file.h"
#include "config/config_tree.h"
#include "config/yaml_tree.h"

using namespace gpudiag;

namespace {

ConfigNode tree_of(const std::string& yaml) {
  auto t = yaml_to_tree(yaml, "t.yaml");
  EXPECT_TRUE(t) << t.error();
  return t ? *t : ConfigNode{};
}

std::string example_text() {
  FILE* f = std::fopen(GPUDIAG_SOURCE_DIR "/etc/gpudiag.yaml", "r");
  std::string s;
  char buf[4096];
  for (size_t n; f && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  if (f) std::fclose(f);
  return s;
}

}  // namespace

TEST(ConfigTree, KeepsKindsTextLinesAndOrder) {
  ConfigNode t = tree_of("b: 1\na:\n  - x\n  - {k: v}\nc:\n");
  ASSERT_TRUE(t.IsMap());
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.entries()[0].first.Scalar(), "b");  // file order, not sorted
  EXPECT_EQ(t["b"].Scalar(), "1");
  EXPECT_EQ(t["b"].line(), 0);
  EXPECT_TRUE(t["a"].IsSequence());
  EXPECT_EQ(t["a"][0].Scalar(), "x");
  EXPECT_EQ(t["a"][1]["k"].Scalar(), "v");
  EXPECT_EQ(t["a"][1].line(), 3);
  EXPECT_TRUE(t["c"].IsDefined());
  EXPECT_TRUE(t["c"].IsNull());
  EXPECT_FALSE(t["missing"].IsDefined());
  EXPECT_FALSE(t["a"][7].IsDefined());
  EXPECT_EQ(t["a"].Scalar(), "");  // as yaml-cpp: no text for a list
}

TEST(ConfigTree, BytesGiveBackTheSameTree) {
  for (const std::string& yaml : {std::string(""), std::string("x"), std::string("a: [1, 2, {b: c}]\n"), example_text()}) {
    ConfigNode t = tree_of(yaml);
    auto back = tree_from_bytes(tree_to_bytes(t));
    ASSERT_TRUE(back) << yaml.substr(0, 40);
    EXPECT_TRUE(*back == t);
  }
}

// The cache is read back by the very rules that read the YAML: the same Config, and the
// same errors with the same lines.
TEST(ConfigTree, TheConfigFromBytesIsTheConfigFromYaml) {
  const std::string text = example_text();
  auto direct = parse_config(text, "/etc/gpudiag/gpudiag.yaml");
  auto back = tree_from_bytes(tree_to_bytes(tree_of(text)));
  ASSERT_TRUE(direct && back);
  auto via = read_config(*back, "/etc/gpudiag/gpudiag.yaml");
  ASSERT_TRUE(via) << via.error();
  EXPECT_EQ(via->ib.count, direct->ib.count);
  EXPECT_EQ(via->plugin.nccl_env, direct->plugin.nccl_env);
  EXPECT_EQ(via->plugin.prefix_format, direct->plugin.prefix_format);
  EXPECT_EQ(via->gpu.count, direct->gpu.count);

  const std::string bad = "ib:\n  count: 8\n  rte_gbps: 400\n";
  auto bad_back = tree_from_bytes(tree_to_bytes(tree_of(bad)));
  ASSERT_TRUE(bad_back);
  auto e1 = parse_config(bad, "c.yaml");
  auto e2 = read_config(*bad_back, "c.yaml");
  ASSERT_FALSE(e1);
  ASSERT_FALSE(e2);
  EXPECT_EQ(e1.error(), e2.error());
}

TEST(ConfigTree, EveryCutOfTheBytesIsRefused) {
  const std::string bytes = tree_to_bytes(tree_of("a: [1, 2, {b: c}]\nd: e\n"));
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(tree_from_bytes(bytes.substr(0, n))) << n;
  EXPECT_FALSE(tree_from_bytes(bytes + "x"));  // one tree, nothing after it
}

TEST(ConfigTree, ForgedCountsAndKindsAreRefusedWithoutAllocating) {
  // A list that claims 2^32-1 items, a scalar longer than the bytes, an unknown kind.
  EXPECT_FALSE(tree_from_bytes(std::string("\x03\x01\x00\x00\x00\xff\xff\xff\xff", 9)));
  EXPECT_FALSE(tree_from_bytes(std::string("\x02\x01\x00\x00\x00\xff\x00\x00\x00" "ab", 11)));
  EXPECT_FALSE(tree_from_bytes(std::string("\x09\x01\x00\x00\x00", 5)));
  // Deeper than kMaxConfigDepth: a list in a list in a list...
  std::string deep;
  for (int i = 0; i < kMaxConfigDepth + 2; ++i) deep += std::string("\x03\x01\x00\x00\x00\x01\x00\x00\x00", 9);
  deep += std::string("\x01\x01\x00\x00\x00", 5);
  EXPECT_FALSE(tree_from_bytes(deep));
}

TEST(ConfigTree, AnAliasBombIsRefusedNotExpanded) {
  std::string yaml = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'h'; ++c) {
    yaml += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) yaml += std::string(i ? ", *" : "*") + prev;
    yaml += "]\n";
    prev = c;
  }
  auto t = yaml_to_tree(yaml, "bomb.yaml");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().find("gpudiag: bomb.yaml: not a config: too large"), std::string::npos) << t.error();
}

TEST(ConfigTree, DeepFlowNestingIsRefusedBeforeYamlCppRecursesIntoIt) {
  const std::string deep = "a: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  auto t = yaml_to_tree(deep, "deep.yaml");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().find("gpudiag: deep.yaml: not a config: too large or too deeply nested"), std::string::npos);
  EXPECT_TRUE(yaml_to_tree("a: [[1, 2], {b: [3]}]\n", "ok.yaml"));
}
