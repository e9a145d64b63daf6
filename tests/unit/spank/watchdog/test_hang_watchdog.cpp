// The hang watchdog's parts: the silence rule and the state dir under a squatting neighbour.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "spank/watchdog/hang_watchdog.h"

using namespace gpudiag;

TEST(NodeSilent, EveryTaskMustBeQuiet) {
  EXPECT_TRUE(node_silent(100, {70, 80}, 20));
  EXPECT_FALSE(node_silent(100, {70, 90}, 20));  // one task wrote 10 s ago
  EXPECT_FALSE(node_silent(100, {}, 20));
  EXPECT_FALSE(node_silent(100, {0}, 0));        // off
}

TEST(StateDir, PicksTheFirstOwnedNameElseCreatesTheFirstFree) {
  using F = DirFact;
  EXPECT_EQ(pick_state_dir({F::missing, F::missing}).create, 0);
  EXPECT_EQ(pick_state_dir({F::ours, F::missing}).use, 0);
  // A squatted name is skipped; a name freed later loses to one the node already uses.
  EXPECT_EQ(pick_state_dir({F::taken, F::missing}).create, 1);
  EXPECT_EQ(pick_state_dir({F::missing, F::ours}).use, 1);
  auto none = pick_state_dir({F::taken, F::taken});
  EXPECT_EQ(none.use, -1);
  EXPECT_EQ(none.create, -1);
}

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpudiag-state-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

HangWatch watch_in(const std::string& state_dir) {
  HangWatch w;
  w.duration_s = 60;
  w.state_dir = state_dir;
  w.diag_dir = "/tmp";
  w.host = "h";
  w.step = "1.0";
  return w;
}

constexpr uid_t kSquatter = 65534;  // nobody: "another user"

}  // namespace

TEST(StateDir, AnotherUsersDirectoryAtTheNameDoesNotSwitchTheWatchdogOff) {
  TempDir t;
  const std::string base = t.path + "/gpudiag-0-1.0";
  ASSERT_EQ(::mkdir(base.c_str(), 0700), 0);
  ASSERT_EQ(::chown(base.c_str(), kSquatter, kSquatter), 0);
  HangWatchdog dog(watch_in(base), ::getpid());
  ASSERT_TRUE(dog.active()) << dog.error();
  EXPECT_EQ(dog.state_dir(), base + ".1");
  EXPECT_NE(dog.notice().find(base + " is taken by uid 65534"), std::string::npos) << dog.notice();
  // A second task of the node meets the first in the same place.
  HangWatch second = watch_in(base);
  second.rank = 1;
  HangWatchdog other(second, ::getppid());
  EXPECT_EQ(other.state_dir(), base + ".1");
  EXPECT_TRUE(other.notice().empty());
}

TEST(StateDir, LinksFilesAndOpenDirectoriesAreNotOurs) {
  TempDir t;
  const std::string base = t.path + "/s";
  const std::string mine = t.path + "/mine";
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(mine.c_str(), base.c_str()), 0);               // a link to a dir of ours
  ASSERT_EQ(::close(::open((base + ".1").c_str(), O_CREAT | O_WRONLY, 0600)), 0);  // a file
  ASSERT_EQ(::mkdir((base + ".2").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((base + ".2").c_str(), 0777), 0);                 // ours, but open to all
  HangWatchdog dog(watch_in(base), ::getpid());
  ASSERT_TRUE(dog.active()) << dog.error();
  EXPECT_EQ(dog.state_dir(), base + ".3");
}

// Issue 21 A2: a neighbour who takes all nine names weakens the watchdog (each task
// then watches itself alone), never switches it off.
TEST(StateDir, EveryNameTakenLeavesEachTaskWatchingItselfAndSaysWho) {
  TempDir t;
  const std::string base = t.path + "/s";
  for (int i = 0; i <= 8; ++i) {
    std::string n = i ? base + "." + std::to_string(i) : base;
    ASSERT_EQ(::mkdir(n.c_str(), 0700), 0);
    ASSERT_EQ(::chown(n.c_str(), kSquatter, kSquatter), 0);
  }
  HangWatchdog dog(watch_in(base), ::getpid());
  ASSERT_TRUE(dog.active()) << dog.error();
  EXPECT_EQ(dog.state_dir().rfind(base + ".", 0), 0u);
  EXPECT_EQ(dog.state_dir().size(), base.size() + 7) << dog.state_dir();  // base.XXXXXX
  struct stat st;
  ASSERT_EQ(::lstat(dog.state_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(dog.notice().find("taken by another user (uid 65534); the hang watchdog stays on, but task 0 watches "
                              "only its own output (in " + dog.state_dir() + ")"),
            std::string::npos)
      << dog.notice();
  HangWatch second = watch_in(base);
  second.rank = 1;
  HangWatchdog other(second, ::getppid());
  ASSERT_TRUE(other.active());
  EXPECT_NE(other.state_dir(), dog.state_dir());
}
