#include <gtest/gtest.h>

#include "nodeinfo/rooted_fs.h"
#include "spank/preflight/preflight.h"

using namespace gpudiag;

namespace {

PreflightFacts healthy() {
  PreflightFacts f;
  f.host = "gpu7";
  f.shm_path = "/dev/shm";
  f.shm_bytes = 64ull << 30;
  f.shm_min = 1ull << 30;
  f.memlock = RLIM_INFINITY;
  return f;
}

std::string all(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST(Preflight, HealthyNodePasses) { EXPECT_TRUE(evaluate_preflight(healthy()).empty()); }

TEST(Preflight, SmallShmNamesSizeAndFix) {
  auto f = healthy();
  f.shm_bytes = 64ull << 20;
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "gpudiag: preflight on gpu7: /dev/shm is 64 MiB, NCCL needs at least 1 GiB: give the container more "
                  "(docker --shm-size=1g) or remount /dev/shm larger");
}

// Sizes print exact (util/duration.h's size_text): a /dev/shm 4 KiB short of what NCCL
// needs once read "1024 MiB, NCCL needs at least 1 GiB", a message that contradicts itself.
TEST(Preflight, ShmJustShortOfTheMinimumSaysByHowMuch) {
  auto f = healthy();
  f.shm_bytes = (1ull << 30) - 4096;
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("/dev/shm is 1048572 KiB, NCCL needs at least 1 GiB"), std::string::npos) << p[0];
}

TEST(Preflight, DownPortOfAnExpectedHcaFromAFixture) {
  auto f = healthy();
  f.ib = discover_ib(RootedFs(GPUDIAG_FIXTURES_DIR "/port-down"));
  f.ib_expect.hcas = {"mlx5_[0-7]"};
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u) << all(p);
  EXPECT_NE(p[0].find("mlx5_3 port 1 is DOWN (phys_state Polling)"), std::string::npos) << p[0];
  f.ib_expect.exclude = {"mlx5_3"};
  EXPECT_TRUE(evaluate_preflight(f).empty());
}

TEST(Preflight, MemlockOnlyMattersWithIb) {
  auto f = healthy();
  f.memlock = 64 * 1024;
  EXPECT_TRUE(evaluate_preflight(f).empty());  // no HCAs
  f.ib = discover_ib(RootedFs(GPUDIAG_FIXTURES_DIR "/healthy"));
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u) << all(p);
  EXPECT_NE(p[0].find("memlock ulimit is 64 KiB"), std::string::npos) << p[0];
  f.check_memlock = false;
  EXPECT_TRUE(evaluate_preflight(f).empty());
}

TEST(Preflight, GpusAndInterfaces) {
  auto f = healthy();
  f.gpus_requested = 8;
  f.gpus_visible = 7;
  f.gpus_on_pci = 7;
  EXPECT_EQ(evaluate_preflight(f).size(), 2u);
  f.gpus_visible = 8;
  f.gpus_on_pci = 8;
  EXPECT_TRUE(evaluate_preflight(f).empty());
  f.socket_ifname = "=eth0,ib0";
  f.interfaces = {"lo", "eth0"};
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("names ib0, which does not exist"), std::string::npos);
  f.socket_ifname = "^docker,lo";  // prefixes are NCCL's business
  EXPECT_TRUE(evaluate_preflight(f).empty());
}

// The missing names of a long user list come in one bounded line, not a line each
// (adversary review 17: a 128 KiB variable was thousands of lines in slurmd's log).
TEST(Preflight, ManyMissingInterfaceNamesAreOneBoundedLine) {
  auto f = healthy();
  f.interfaces = {"lo", "eth0"};
  f.socket_ifname = "=eth0,ib0,ib1";
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("names ib0, ib1, which do not exist here"), std::string::npos) << p[0];
  f.socket_ifname = "=lo";
  for (int i = 0; i < 20000; ++i) f.socket_ifname += ",x" + std::to_string(i);
  f.socket_ifname += "," + std::string(10000, 'y');
  p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_LT(p[0].size(), 1024u);
  EXPECT_NE(p[0].find("names x0, x1, x2, x3, x4, x5, x6, x7 (and 19993 more), which do not exist"), std::string::npos)
      << p[0];
}

// Issue 21 A9: the message reaches slurmd's log; the user's bytes must not forge a line.
TEST(Preflight, AUsersInterfaceNameCannotForgeALogLine) {
  auto f = healthy();
  f.socket_ifname = "=lo,eth9\n[2026-01-01T00:00:00] error: FORGED\x1b[2J";
  f.interfaces = {"lo"};
  auto p = evaluate_preflight(f);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].find('\n'), std::string::npos) << p[0];
  EXPECT_EQ(p[0].find('\x1b'), std::string::npos) << p[0];
  EXPECT_NE(p[0].find("names eth9\\x0a[2026-01-01T00:00:00] error: FORGED\\x1b[2J, which does not exist"),
            std::string::npos)
      << p[0];
}
