#include <gtest/gtest.h>
#include <fcntl.h>
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

// A tree that links out of itself: the checker runs as root, so what lies outside
// (here a stand-in for /etc/shadow) must never be read, listed or resolved to.
class RootedFsEscape : public ::testing::TestWithParam<RootedFs::Resolver> {
 protected:
  void SetUp() override {
    char out[] = "/tmp/gpudiag-outside-XXXXXX";
    outside_ = ::mkdtemp(out);
    fs::create_directories(outside_ + "/ports/1");
    std::ofstream(outside_ + "/shadow") << "root:SECRET:19000::::::\n";
    std::ofstream(outside_ + "/ports/1/state") << "SECRET\n";
    char tmpl[] = "/tmp/gpudiag-rootfs-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    fs::create_directories(root_ + "/sys/class/x/ports/1");
    fs::create_directories(root_ + "/sys/devices/pci0000:00/0000:00:01.0");
    std::ofstream(root_ + "/sys/devices/pci0000:00/0000:00:01.0/vendor") << "0x10de\n";
    fs::create_symlink(outside_ + "/shadow", root_ + "/sys/class/x/ports/1/state");  // absolute
    std::string up;
    for (int i = 0; i < 12; ++i) up += "../";
    fs::create_symlink(up + outside_.substr(1) + "/shadow", root_ + "/sys/class/x/ports/1/rate");  // climbing
    fs::create_symlink(outside_, root_ + "/sys/class/hca");  // a directory elsewhere
    // Links as a copied sysfs has them: relative, and absolute ones meant for its root.
    fs::create_symlink("../../devices/pci0000:00/0000:00:01.0", root_ + "/sys/class/x/device");
    fs::create_symlink("/sys/devices/pci0000:00/0000:00:01.0", root_ + "/sys/class/x/absdev");
  }
  void TearDown() override {
    fs::remove_all(root_);
    fs::remove_all(outside_);
  }
  std::string outside_, root_;
};

TEST_P(RootedFsEscape, ReadsNeverLeaveTheRoot) {
  RootedFs rfs(root_, GetParam());
  for (const char* p : {"/sys/class/x/ports/1/state", "/sys/class/x/ports/1/rate", "/sys/class/hca/ports/1/state",
                        "/sys/class/hca/shadow"}) {
    auto r = rfs.read_file(p);
    ASSERT_FALSE(r) << p << " read " << *r;
    EXPECT_EQ(r.error().find("SECRET"), std::string::npos);
    EXPECT_FALSE(rfs.read_prefix(p, 64)) << p;
    EXPECT_FALSE(rfs.exists(p)) << p;
  }
  EXPECT_FALSE(rfs.list_dir("/sys/class/hca/ports")) << "listed a directory outside the root";
  EXPECT_FALSE(rfs.list_dir("/sys/class/hca"));
  EXPECT_TRUE(rfs.lexists("/sys/class/hca"));
  // ".." stops at the root, as it does at "/".
  EXPECT_EQ(*rfs.read_file("/../../sys/devices/pci0000:00/0000:00:01.0/vendor"), "0x10de\n");
}

TEST_P(RootedFsEscape, LinksResolveInsideTheRoot) {
  RootedFs rfs(root_, GetParam());
  EXPECT_EQ(*rfs.resolve("/sys/class/x/device"), "/sys/devices/pci0000:00/0000:00:01.0");
  // An absolute target means the tree's own /sys, not the host's.
  EXPECT_EQ(*rfs.resolve("/sys/class/x/absdev"), "/sys/devices/pci0000:00/0000:00:01.0");
  EXPECT_EQ(*rfs.read_file("/sys/class/x/absdev/vendor"), "0x10de\n");
  EXPECT_EQ(rfs.resolve("/sys/class/x/ports/1/state").error(), "/sys/class/x/ports/1/state: dangling symlink");
  auto hca = rfs.resolve("/sys/class/hca");
  ASSERT_FALSE(hca) << *hca;
  EXPECT_EQ(hca.error().find(outside_), std::string::npos);
}

TEST_P(RootedFsEscape, FifoAndDeviceNodesAreNotOpened) {
  ASSERT_EQ(::mkfifo((root_ + "/sys/class/x/fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/null", root_ + "/sys/class/x/devnull");
  // A writer would see a reader appear if the FIFO were opened; nothing is opened.
  RootedFs rfs(root_, GetParam());
  auto r = rfs.read_file("/sys/class/x/fifo");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "/sys/class/x/fifo: not a regular file");
  int w = ::open((root_ + "/sys/class/x/fifo").c_str(), O_WRONLY | O_NONBLOCK);
  EXPECT_EQ(w, -1) << "the FIFO has a reader: it was opened";
  EXPECT_EQ(errno, ENXIO);
  if (w >= 0) ::close(w);
  EXPECT_FALSE(rfs.read_file("/sys/class/x/devnull"));  // /dev/null inside the root: absent
}

INSTANTIATE_TEST_SUITE_P(Resolvers, RootedFsEscape,
                         ::testing::Values(RootedFs::Resolver::automatic, RootedFs::Resolver::walk),
                         [](const auto& p) { return p.param == RootedFs::Resolver::walk ? "walk" : "openat2"; });

TEST(RootedFsHost, DeviceNodesAreRefusedUnderTheHostRootToo) {
  auto r = RootedFs("/").read_file("/dev/null");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "/dev/null: not a regular file");
}
