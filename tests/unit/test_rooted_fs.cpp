#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nodeinfo/rooted_fs.h"

using namespace gpudiag;
namespace fs = std::filesystem;

class RootedFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-rootfs-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    fs::create_directories(root_ + "/sys/a");
    std::ofstream(root_ + "/sys/a/small") << "hello\n";
    std::ofstream(root_ + "/sys/a/big") << std::string(10000, 'x');
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(RootedFsTest, ReadsUnderRoot) {
  RootedFs rfs(root_ + "/");
  EXPECT_EQ(*rfs.read_file("/sys/a/small"), "hello\n");
  EXPECT_EQ(rfs.host_path("/sys/a"), root_ + "/sys/a");
  EXPECT_FALSE(rfs.is_host_root());
  EXPECT_TRUE(RootedFs("/").is_host_root());
}

TEST_F(RootedFsTest, TooLargeIsAnErrorButPrefixIsNot) {
  RootedFs rfs(root_);
  auto r = rfs.read_file("/sys/a/big", 4096);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "/sys/a/big: file is larger than 4096 bytes");
  EXPECT_EQ(rfs.read_prefix("/sys/a/big", 64)->size(), 64u);
}

TEST_F(RootedFsTest, FifoIsNotReadAndDoesNotBlock) {
  ASSERT_EQ(::mkfifo((root_ + "/sys/a/fifo").c_str(), 0600), 0);
  RootedFs rfs(root_);
  auto r = rfs.read_file("/sys/a/fifo");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("not a regular file"), std::string::npos);
}

TEST_F(RootedFsTest, DanglingSymlinkIsNamed) {
  fs::create_symlink("../nowhere", root_ + "/sys/a/link");
  RootedFs rfs(root_);
  EXPECT_EQ(rfs.read_file("/sys/a/link").error(), "/sys/a/link: dangling symlink");
  EXPECT_EQ(rfs.resolve("/sys/a/link").error(), "/sys/a/link: dangling symlink");
  EXPECT_TRUE(rfs.lexists("/sys/a/link"));
  EXPECT_FALSE(rfs.exists("/sys/a/link"));
}

TEST_F(RootedFsTest, ResolveStaysInsideRoot) {
  fs::create_directories(root_ + "/sys/devices/x");
  fs::create_symlink("../devices/x", root_ + "/sys/a/dev");
  fs::create_symlink("/etc", root_ + "/sys/a/escape");
  RootedFs rfs(root_);
  EXPECT_EQ(*rfs.resolve("/sys/a/dev"), "/sys/devices/x");
  EXPECT_FALSE(rfs.resolve("/sys/a/escape"));
}

TEST_F(RootedFsTest, ListDirSortedAndMissingIsError) {
  RootedFs rfs(root_);
  EXPECT_EQ(*rfs.list_dir("/sys/a"), (std::vector<std::string>{"big", "small"}));
  EXPECT_FALSE(rfs.list_dir("/sys/none"));
}
