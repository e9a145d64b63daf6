// The --diag list (diag_options): items, GPUDIAG_DIAG under --diag, errors, limits.
#include <gtest/gtest.h>

#include "spank/plan/diag_options.h"
#include "spank/plan/step_plan.h"

using namespace gpudiag;

TEST(DiagList, BareDiagTurnsOnDefaults) {
  auto d = parse_diag_list("");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->enabled);
  EXPECT_EQ(d->nccl_level, "INFO");
  EXPECT_EQ(d->nccl_subsys, "INIT,NET,ENV");
  EXPECT_FALSE(d->prefix);
}

TEST(DiagList, Items) {
  auto d = parse_diag_list("nccl=trace,subsys=INIT+COLL+^PROXY,noprefix,dir=/scratch/me/diag");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->nccl_level, "TRACE");
  EXPECT_EQ(d->nccl_subsys, "INIT,COLL,^PROXY");
  EXPECT_EQ(d->prefix, false);
  EXPECT_EQ(d->dir, "/scratch/me/diag");
}

TEST(DiagList, OptionOverridesEnvItemByItem) {
  auto env = parse_diag_list("nccl=warn,noprefix");
  auto both = parse_diag_list("nccl=trace", *env);
  EXPECT_EQ(both->nccl_level, "TRACE");
  EXPECT_EQ(both->prefix, false);
}

TEST(DiagList, ErrorsAreClear) {
  auto d = parse_diag_list("foo");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().rfind("gpudiag: --diag: unknown item 'foo' (known: ", 0), 0u);
  EXPECT_FALSE(parse_diag_list("nccl=LOUD"));
  EXPECT_FALSE(parse_diag_list("dir=relative/path"));
  EXPECT_FALSE(parse_diag_list("noprefix=1"));
  EXPECT_FALSE(parse_diag_list("subsys=INIT;rm"));
  EXPECT_FALSE(parse_diag_list("dir=/tmp/x\nLD_PRELOAD=/evil"));
  EXPECT_FALSE(parse_diag_list("hang=soon"));
  EXPECT_FALSE(parse_diag_list("hang"));
  EXPECT_FALSE(parse_diag_list("hang=-5s"));
  EXPECT_FALSE(parse_diag_list("hang=0.1s"));
  EXPECT_FALSE(parse_diag_list("hang-action=explode"));
  EXPECT_FALSE(parse_diag_list("preflight=yes"));
}

TEST(DiagList, HelpAndErrorsListEveryItemFromTheParsersTable) {
  const std::string items = diag_items_list();
  for (const char* item : {"nccl=LEVEL", "subsys=A+B", "dir=PATH", "noprefix", "prefix", "hang=DURATION",
                           "hang-action=kill|report", "preflight", "nopreflight"})
    EXPECT_NE(items.find(item), std::string::npos) << item;
  EXPECT_NE(diag_option_help().find(items), std::string::npos);
  EXPECT_NE(parse_diag_list("x").error().find("(known: " + items + ")"), std::string::npos);
}

// slurmstepd reads GPUDIAG_DIAG through an 8 KiB buffer: srun refuses more (issue 21.3).
TEST(DiagList, LongerThanSlurmstepdCanReadIsRefused) {
  std::string dir = "dir=/" + std::string(kMaxDiagListBytes - 5, 'a');
  ASSERT_EQ(dir.size(), kMaxDiagListBytes);
  EXPECT_TRUE(parse_diag_list(dir));
  auto r = parse_diag_list(dir + "b");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "gpudiag: --diag: the list is 8192 bytes long, more than the 8191 that slurmstepd can read on "
                       "the nodes: shorten it");
}

TEST(DiagList, HangAndPreflight) {
  auto d = parse_diag_list("hang=10m,hang-action=report,preflight");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->hang_s, 600);
  EXPECT_EQ(d->hang_action, "report");
  EXPECT_EQ(d->preflight, true);
  EXPECT_EQ(parse_diag_list("hang=20s")->hang_s, 20);
  EXPECT_EQ(parse_diag_list("hang=off")->hang_s, 0);
  EXPECT_EQ(parse_diag_list("nopreflight")->preflight, false);
  EXPECT_FALSE(parse_diag_list("")->hang_s);
}
