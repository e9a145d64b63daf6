// The one control-byte rule (issue 20, issue 21 A10): checks and escapes agree.
#include <gtest/gtest.h>

#include "util/control_bytes.h"

using namespace gpudiag;

TEST(ControlBytes, OneRuleForChecksAndEscapes) {
  EXPECT_TRUE(is_control_byte(0x00));
  EXPECT_TRUE(is_control_byte('\n'));
  EXPECT_TRUE(is_control_byte(0x1f));
  EXPECT_TRUE(is_control_byte(0x7f));
  EXPECT_FALSE(is_control_byte(' '));
  EXPECT_FALSE(is_control_byte(0xc2));
  EXPECT_EQ(control_length("a\x1b", 1), 1u);
  EXPECT_EQ(control_length("a\xc2\x9b", 1), 2u);
  EXPECT_EQ(control_length("\xc2\xa0", 0), 0u);  // U+00A0 is text
  EXPECT_EQ(control_length("\xc2", 0), 0u);       // a cut-off sequence is not a control
  EXPECT_TRUE(is_one_printable_line("eth0,ib0 caf\xc3\xa9"));
  EXPECT_FALSE(is_one_printable_line("a\nb"));
  EXPECT_FALSE(is_one_printable_line("a\x7f"));
  // Issue 21 A10: a C1 control (U+009B CSI) is refused where it would be escaped.
  EXPECT_FALSE(is_one_printable_line("run\xc2\x9b" "31m"));
  EXPECT_EQ(replace_control("a\x1b[2J\xc2\x9b" "b\n", ' '), "a [2J b ");
}

// The adversary of issue 30 (1d): a lone byte 0x9b is CSI, 0x9d OSC, to a terminal in
// 8-bit mode (the Linux console, xterm without UTF-8). Where such a byte ends a UTF-8
// character (U+2014 is \xe2\x80\x94) it is text.
TEST(ControlBytes, ALoneEightBitC1ByteIsAControlButNotInsideACharacter) {
  EXPECT_EQ(control_length("a\x9b" "31m", 1), 1u);
  EXPECT_EQ(control_length("\x9d", 0), 1u);
  EXPECT_EQ(escape_control("a\x9b" "31m\x9d" "0;x\x07"), "a\\x9b31m\\x9d0;x\\x07");
  EXPECT_FALSE(is_one_printable_line("run\x9b" "31m"));
  const std::string dash = "a\xe2\x80\x94" "b\xf0\x9f\x98\x80";  // an em dash, an emoji
  EXPECT_TRUE(is_one_printable_line(dash));
  EXPECT_EQ(escape_control(dash), dash);
  EXPECT_EQ(escape_control("\xa0\x9b"), "\xa0\\x9b");  // 0xa0 is no lead byte
  EXPECT_EQ(escape_control_in_json("\"a\x9b\""), "\"a\\u009b\"");
}

// Issue 30: `gpudiag nccl-log --json` let DEL and C1 controls through (the serializer
// escapes only C0). They become \u escapes; the JSON's own newlines stay.
TEST(ControlBytes, JsonGetsDelAndC1AsUnicodeEscapes) {
  const std::string json = "{\n  \"m\": \"a\x7f" "b\xc2\x80" "c\xc2\x9b" "31m\xc2\x9f\xc2\xa0\xc3\xa9\\u001b\"\n}";
  const std::string out = escape_control_in_json(json);
  EXPECT_EQ(out, "{\n  \"m\": \"a\\u007fb\\u0080c\\u009b31m\\u009f\xc2\xa0\xc3\xa9\\u001b\"\n}");
  for (std::size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(control_length(out, i) == 0 || out[i] == '\n') << i;
}

TEST(EscapeControl, EscapesC0DelAndC1KeepsText) {
  EXPECT_EQ(escape_control("a\x1b[2Jb\x07"), "a\\x1b[2Jb\\x07");
  EXPECT_EQ(escape_control("x\x7fy"), "x\\x7fy");
  EXPECT_EQ(escape_control("csi\xc2\x9b" "31m"), "csi\\xc2\\x9b31m");
  EXPECT_EQ(escape_control("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 text stays
  EXPECT_EQ(escape_control("l1\n\tl2\r", true), "l1\n\tl2\\x0d");
  EXPECT_EQ(escape_control("l1\nl2"), "l1\\x0al2");
}
