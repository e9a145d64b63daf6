#include <gtest/gtest.h>

#include <random>

#include "spank/relay/line_prefixer.h"

using namespace gpudiag;

namespace {
std::string run(LinePrefixer& p, const std::vector<std::string>& chunks, bool finish = true) {
  std::string out;
  for (const auto& c : chunks) p.feed(c, out);
  if (finish) p.finish(out);
  return out;
}
}  // namespace

TEST(LinePrefixer, TagsWholeLines) {
  LinePrefixer p("[n1:3]");
  EXPECT_EQ(run(p, {"hello\nworld\n"}), "[n1:3] hello\n[n1:3] world\n");
}

TEST(LinePrefixer, HoldsPartialLinesAcrossReads) {
  LinePrefixer p("[n:0]");
  std::string out;
  p.feed("par", out);
  EXPECT_EQ(out, "");
  EXPECT_EQ(p.held(), 3u);
  p.feed("tial\nnext", out);
  EXPECT_EQ(out, "[n:0] partial\n");
  p.finish(out);
  // No final newline: the relay adds one and marks it with '+'.
  EXPECT_EQ(out, "[n:0] partial\n[n:0]+next\n");
}

TEST(LinePrefixer, EmptyLinesAndBinaryBytes) {
  LinePrefixer p("[n:0]");
  static const char kData[] = "\n\0\xff\x1b[31m\n";
  static const char kWant[] = "[n:0] \n[n:0] \0\xff\x1b[31m\n";
  EXPECT_EQ(run(p, {std::string(kData, sizeof kData - 1)}), std::string(kWant, sizeof kWant - 1));
}

TEST(LinePrefixer, SplitsLongLinesWithinSlurmsMessageSize) {
  LinePrefixer p("[n:0]", 64 + 7);  // 64 bytes of payload per line
  ASSERT_EQ(p.max_payload(), 64u);
  std::string line(150, 'x');
  std::string out = run(p, {line + "\n"});
  EXPECT_EQ(out, "[n:0]+" + std::string(64, 'x') + "\n[n:0]+" + std::string(64, 'x') + "\n[n:0] " +
                     std::string(22, 'x') + "\n");
  // A line of exactly one payload is one line, not a piece and an empty line.
  LinePrefixer q("[n:0]", 71);
  EXPECT_EQ(run(q, {std::string(64, 'y') + "\n"}), "[n:0] " + std::string(64, 'y') + "\n");
}

TEST(LinePrefixer, EveryLineFitsOneSlurmMessage) {
  LinePrefixer p("[a-very-long-host-name-0001:12345]");
  std::string out = run(p, {std::string(100000, 'z') + "\n", std::string(5000, 'q')});
  std::size_t start = 0;
  while (start < out.size()) {
    auto nl = out.find('\n', start);
    ASSERT_NE(nl, std::string::npos);
    EXPECT_LE(nl - start + 1, kSlurmIoMessage);
    start = nl + 1;
  }
}

TEST(LinePrefixer, StrippingGivesBackTheExactBytesWhateverTheReads) {
  std::mt19937 rng(7);
  std::string original;
  for (int i = 0; i < 400; ++i) {
    std::size_t len = rng() % 7 == 0 ? rng() % 5000 : rng() % 80;
    for (std::size_t j = 0; j < len; ++j) original.push_back(static_cast<char>(rng() % 256 == 10 ? 'a' : rng() % 256));
    original.push_back('\n');
  }
  original += std::string(3000, 'T');  // no final newline
  for (std::size_t max_line : {80u, 1024u}) {
    LinePrefixer p("[h:1]", max_line);
    std::vector<std::string> chunks;
    for (std::size_t pos = 0; pos < original.size();) {
      std::size_t n = 1 + rng() % 3000;
      chunks.push_back(original.substr(pos, n));
      pos += n;
    }
    std::string out = run(p, chunks);
    // Another rank's lines in between change nothing.
    std::string mixed = "[h:2] other\n" + out + "srun: message\n";
    EXPECT_EQ(strip_prefixes(mixed, "[h:1]"), original) << max_line;
  }
}

TEST(LinePrefixer, MaxOutputBoundsWhatAnyInputTagsInto) {
  // Bare newlines are the worst case (a whole tagged line per byte); long lines, held
  // partial lines and every mix must stay within the bound too (issue 30.3).
  std::mt19937 rng(30);
  for (std::size_t max_line : {80u, 1024u, 4096u}) {
    for (const std::string& tag : {std::string(), std::string("[h:1]"), std::string(256, 't')}) {
      LinePrefixer p(tag, max_line);
      for (int round = 0; round < 400; ++round) {
        std::string data(rng() % 3000, 'x');
        const unsigned newline_every = rng() % 3 == 0 ? 1 : rng() % 2000 + 1;
        for (auto& c : data)
          if (rng() % newline_every == 0) c = '\n';
        const std::size_t bound = p.max_output(data.size());
        std::string out;
        p.feed(data, out);
        ASSERT_LE(p.held(), p.max_payload()) << "a partial line held past one piece";
        LinePrefixer copy = p;
        copy.finish(out);
        ASSERT_LE(out.size(), bound) << "max_line " << max_line << ", tag " << tag.size() << ", round " << round;
      }
    }
  }
}

TEST(LinePrefixer, InputForIsTheMostThatFitsABudget) {
  for (const std::string& tag : {std::string(), std::string("[h:1]"), std::string(256, 't')}) {
    LinePrefixer p(tag);
    std::string out;
    p.feed("partial", out);
    for (std::size_t budget : {0u, 100u, 1000u, 65536u}) {
      const std::size_t n = p.input_for(budget);
      if (n > 0) {
        EXPECT_LE(p.max_output(n), budget);
      }
      EXPECT_GT(p.max_output(n + 1), budget);
    }
    // The worst case meets the bound exactly: every byte a newline.
    const std::size_t n = p.input_for(65536);
    out.clear();
    LinePrefixer copy = p;
    copy.feed(std::string(n, '\n'), out);
    copy.finish(out);
    EXPECT_LE(out.size(), 65536u);
    EXPECT_GT(out.size(), 65536u - 3 * (tag.size() + 2)) << "the bound is far from what the worst input makes";
  }
}

TEST(RelayReadLimit, OneRuleForBothRelays) {
  LinePrefixer p("[node7:31]");
  EXPECT_EQ(relay_read_limit(p, false, 1 << 30), kRelayStreamBudget) << "untagged: the stream's budget";
  EXPECT_EQ(relay_read_limit(p, false, 100), 100u) << "or the room left, if less";
  EXPECT_EQ(relay_read_limit(p, true, 1 << 30), p.input_for(kRelayStreamBudget));
  EXPECT_EQ(relay_read_limit(p, true, 0), 0u);
  EXPECT_GT(relay_read_limit(p, true, kRelayStreamBudget), 4000u) << "reads stay large enough to be cheap";
}
