// Run state against a real temporary directory (its writer: tests/unit/test_private_file.cpp).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "healthcheck/state/run_state.h"

using namespace gpudiag;
namespace fs = std::filesystem;

namespace {

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-state-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override { fs::remove_all(root); }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  static mode_t mode_of(const std::string& p) {
    struct stat st;
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  std::string root;
};

}  // namespace

using RunStateTest = TempDir;

TEST_F(RunStateTest, FirstRunThenTheStoredValuesComeBack) {
  const std::string dir = root + "/state";
  auto s = RunState::load(dir, "gpu-node-01");
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.note(), "");
  EXPECT_TRUE(s.previous("xid").is_null());
  s.set("xid", {{"last_seq", 12}});
  ASSERT_TRUE(s.save()) << s.save().error();
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(dir + "/gpu-node-01.json"), 0600u);

  auto again = RunState::load(dir, "gpu-node-01");
  EXPECT_EQ(again.previous("xid")["last_seq"], 12);
  // A run of other checks keeps what xid stored.
  again.set("ibcounters", {{"ports", nlohmann::json::object()}});
  ASSERT_TRUE(again.save());
  auto third = RunState::load(dir, "gpu-node-01");
  EXPECT_EQ(third.previous("xid")["last_seq"], 12);
  EXPECT_TRUE(third.previous("ibcounters").is_object());
  // Nothing left behind but the one file.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST_F(RunStateTest, NodeNamesCannotLeaveTheDirectory) {
  auto s = RunState::load(root, "../../etc/passwd");
  s.set("xid", 1);
  ASSERT_TRUE(s.save());
  EXPECT_EQ(s.path(), root + "/node.._.._etc_passwd.json");
  EXPECT_TRUE(fs::exists(s.path()));
}

TEST_F(RunStateTest, ANodeNameThatIsNotUtf8IsStillSaved) {
  auto s = RunState::load(root, "gpu\xff");
  s.set("xid", 1);
  auto saved = s.save();
  ASSERT_TRUE(saved) << saved.error();
  EXPECT_EQ(RunState::load(root, "gpu\xff").previous("xid"), 1);
}

TEST_F(RunStateTest, GarbageIsNoPreviousRunWithANote) {
  for (const char* junk : {"{not json", "[]", "{\"version\": 99, \"checks\": {}}", "\xff\xfe\x00"}) {
    {
      std::ofstream f(root + "/n.json", std::ios::trunc);
      f << junk;
    }
    auto s = RunState::load(root, "n");
    EXPECT_TRUE(s.previous("xid").is_null()) << junk;
    EXPECT_NE(s.note().find("treated as no previous run"), std::string::npos) << s.note();
    s.set("xid", 1);
    EXPECT_TRUE(s.save()) << junk;  // and the next run has a good file
    EXPECT_EQ(RunState::load(root, "n").previous("xid"), 1);
  }
}

TEST_F(RunStateTest, SymlinksAreNeverFollowed) {
  const std::string target = root + "/elsewhere.json";
  { std::ofstream(target) << "{}"; }
  ASSERT_EQ(::symlink(target.c_str(), (root + "/n.json").c_str()), 0);
  auto s = RunState::load(root, "n");
  EXPECT_NE(s.note().find("symlink"), std::string::npos) << s.note();
  s.set("xid", 1);
  auto saved = s.save();
  EXPECT_FALSE(saved);
  EXPECT_NE(saved.error().find("symlink"), std::string::npos) << saved.error();
  EXPECT_EQ(slurp(target), "{}");

  // The directory itself as a symlink: not used.
  const std::string real = root + "/real";
  fs::create_directory(real);
  ::chmod(real.c_str(), 0700);
  ASSERT_EQ(::symlink(real.c_str(), (root + "/link").c_str()), 0);
  auto d = RunState::load(root + "/link", "n");
  EXPECT_NE(d.note().find("symlink"), std::string::npos) << d.note();
  d.set("xid", 1);
  EXPECT_FALSE(d.save());
  EXPECT_TRUE(fs::is_empty(real));
}

TEST_F(RunStateTest, ADirectoryOthersCanWriteIsRefused) {
  ::chmod(root.c_str(), 0777);
  auto s = RunState::load(root, "n");
  EXPECT_NE(s.note().find("others can write"), std::string::npos) << s.note();
  s.set("xid", 1);
  EXPECT_FALSE(s.save());
}

TEST_F(RunStateTest, DisabledStateKeepsNothing) {
  auto s = RunState::disabled("no run state under --fs-root");
  EXPECT_FALSE(s.enabled());
  s.set("xid", 1);
  auto saved = s.save();
  ASSERT_TRUE(saved);
  EXPECT_FALSE(*saved);
  EXPECT_TRUE(uses_run_state({"ib", "xid"}));
  EXPECT_FALSE(uses_run_state({"ib", "acs"}));
}

TEST_F(RunStateTest, ADirectoryWithASymlinkAboveItIsNotUsed) {
  // Issue 30: a link anywhere above the state dir could aim root's write into a place
  // its owner chose (the writer's own rule: AtomicFileTest.ASymlinkedDirectoryOnThePathIsRefused).
  const std::string real = root + "/real";
  fs::create_directories(real + "/sub");
  ASSERT_EQ(::symlink(real.c_str(), (root + "/link").c_str()), 0);
  auto s = RunState::load(root + "/link/sub", "n");
  EXPECT_NE(s.note().find("symlink"), std::string::npos) << s.note();
  s.set("xid", 1);
  EXPECT_FALSE(s.save());
  EXPECT_FALSE(fs::exists(real + "/sub/n.json"));
}
