// The job's MASTER_PORT salt (port_salt): what counts as one, and its permutation.
#include <gtest/gtest.h>

#include <vector>

#include "spank/plan/port_salt.h"

using namespace gpudiag;

TEST(PortSalt, OnlySixteenLowercaseHexDigitsAreASalt) {
  EXPECT_EQ(parse_port_salt(std::string("0123456789abcdef")), 0x0123456789abcdefull);
  EXPECT_EQ(parse_port_salt(std::string("ffffffffffffffff")), ~0ull);
  for (const char* bad : {"", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF", "0123456789abcdeg",
                          " 123456789abcdef", "-123456789abcdef"})
    EXPECT_EQ(parse_port_salt(std::string(bad)), 0u) << bad;
  EXPECT_EQ(parse_port_salt(std::nullopt), 0u);
  auto made = new_port_salt();
  ASSERT_TRUE(made);
  EXPECT_EQ(made->size(), 16u);
  EXPECT_NE(parse_port_salt(made), 0u);  // 1 in 2^64 to be zero
  EXPECT_NE(*made, *new_port_salt());
}

// The salt keys a permutation: every index lands on exactly one port, for any span.
TEST(PortSalt, ThePermutationIsABijectionOfTheRange) {
  for (std::uint64_t span : {1ull, 2ull, 3ull, 7ull, 4536ull, 65536ull})
    for (std::uint64_t salt : {1ull, 0x0123456789abcdefull, ~0ull}) {
      std::vector<bool> hit(span, false);
      for (std::uint64_t i = 0; i < span; ++i) {
        const std::uint64_t p = permute_port_index(i, span, salt);
        ASSERT_LT(p, span) << span;
        ASSERT_FALSE(hit[p]) << "span " << span << " salt " << salt << " index " << i;
        hit[p] = true;
      }
    }
}
