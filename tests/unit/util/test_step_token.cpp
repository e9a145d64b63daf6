// The step's token: its shape, its randomness, and the comparison that says nothing by its time.
#include "util/step_token.h"

#include <gtest/gtest.h>

#include <set>

using namespace gpudiag;

TEST(StepToken, NewTokensHaveTheShapeAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    auto t = new_step_token();
    ASSERT_TRUE(t);
    EXPECT_TRUE(is_step_token(*t)) << *t;
    seen.insert(*t);
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST(StepToken, OnlyThirtyTwoLowercaseHexDigitsAreAToken) {
  EXPECT_TRUE(is_step_token(std::string(32, 'a')));
  EXPECT_TRUE(is_step_token("0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(is_step_token(std::string(31, 'a')));
  EXPECT_FALSE(is_step_token(std::string(33, 'a')));
  EXPECT_FALSE(is_step_token(std::string(32, 'A')));
  EXPECT_FALSE(is_step_token(std::string(31, 'a') + "g"));
  EXPECT_FALSE(is_step_token(std::string(31, 'a') + std::string(1, '\0')));
  EXPECT_FALSE(is_step_token(""));
}

TEST(StepToken, SameTokenComparesEveryByte) {
  const std::string t(32, 'a');
  EXPECT_TRUE(same_token(t, t));
  EXPECT_FALSE(same_token(t, std::string(31, 'a') + "b"));
  EXPECT_FALSE(same_token(t, "b" + std::string(31, 'a')));
  EXPECT_FALSE(same_token(t, std::string(31, 'a')));
  EXPECT_FALSE(same_token(t, ""));
}
