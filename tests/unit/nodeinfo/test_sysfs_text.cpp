#include <gtest/gtest.h>

#include "nodeinfo/sysfs_text.h"

using namespace gpudiag;

TEST(AttributeText, TrimsTrailingNewline) {
  auto r = attribute_text("InfiniBand\n", "/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "InfiniBand");
}

TEST(AttributeText, EmptyFileNamesTheFile) {
  auto r = attribute_text("\n", "/sys/class/infiniband/mlx5_0/ports/1/state");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "/sys/class/infiniband/mlx5_0/ports/1/state: file is empty");
}

TEST(AttributeText, BinaryIsRejected) {
  std::string raw("4: ACT\0IVE", 10);
  auto r = attribute_text(raw, "/f");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("binary"), std::string::npos);
  EXPECT_FALSE(attribute_text("\xff\xfe", "/f"));
}

TEST(AttributeText, OverlongIsRejected) {
  EXPECT_FALSE(attribute_text(std::string(300, 'a'), "/f"));
  EXPECT_TRUE(attribute_text(std::string(256, 'a'), "/f"));
}

TEST(ParseHex, AcceptsKernelForms) {
  EXPECT_EQ(*parse_hex_attr("0x10de\n", "/v"), 0x10deu);
  EXPECT_EQ(*parse_hex_attr("030200", "/c"), 0x030200u);
  EXPECT_FALSE(parse_hex_attr("0x", "/v"));
  EXPECT_FALSE(parse_hex_attr("0x10dg", "/v"));
  EXPECT_FALSE(parse_hex_attr("0xffffffffffffffffff", "/v"));
}

TEST(ParseInt, AcceptsNegativeNuma) {
  EXPECT_EQ(*parse_int_attr("-1\n", "/n"), -1);
  EXPECT_EQ(*parse_int_attr("1", "/n"), 1);
  EXPECT_FALSE(parse_int_attr("one", "/n"));
  EXPECT_FALSE(parse_int_attr("1 2", "/n"));
}
