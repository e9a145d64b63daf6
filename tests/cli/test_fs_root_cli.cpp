// gpudiag-health --fs-root over a tree whose links point out of it: what lies outside
// the root must never be read, listed or printed, and a FIFO in the tree must not hang
// the checker.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_process.h"

namespace fs = std::filesystem;

namespace {

const std::string kBin = GPUDIAG_HEALTH_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;

class FsRootEscape : public ::testing::Test {
 protected:
  void SetUp() override {
    char outside[] = "/tmp/gpudiag-outside-XXXXXX";
    outside_ = ::mkdtemp(outside);
    secret_ = "root:SECRET-" + std::to_string(::getpid()) + ":19000:0:99999:7:::";
    // Shaped like an HCA's ports/1 so that a listing that followed the link would
    // find something to read.
    fs::create_directories(outside_ + "/ports/1");
    for (const char* f : {"/shadow", "/ports/1/state", "/ports/1/rate", "/ports/1/phys_state", "/ports/1/link_layer"}) {
      std::ofstream(outside_ + f) << secret_ << "\n";
      ::chmod((outside_ + f).c_str(), 0600);
    }
    char root[] = "/tmp/gpudiag-escape-root-XXXXXX";
    root_ = ::mkdtemp(root);
    fs::copy(kFixtures + "/healthy", root_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  void TearDown() override {
    fs::remove_all(root_);
    fs::remove_all(outside_);
  }
  void replace_with_link(const std::string& kernel_path, const std::string& target) {
    fs::remove(root_ + kernel_path);
    fs::create_symlink(target, root_ + kernel_path);
  }
  std::string outside_, root_, secret_;
};

TEST_F(FsRootEscape, LinksOutOfTheRootAreNeverFollowedAndFifosNeverBlock) {
  const std::string ib = "/sys/class/infiniband";
  replace_with_link(ib + "/mlx5_0/ports/1/state", outside_ + "/shadow");  // absolute
  replace_with_link(ib + "/mlx5_1/ports/1/rate",
                    "../../../../../../../../../../../../../../../../../.." + outside_ + "/shadow");  // climbing
  replace_with_link(ib + "/mlx5_2", outside_);  // a whole HCA directory elsewhere
  fs::remove(root_ + ib + "/mlx5_3/ports/1/phys_state");
  ASSERT_EQ(::mkfifo((root_ + ib + "/mlx5_3/ports/1/phys_state").c_str(), 0600), 0);
  // `timeout` turns a hang on the FIFO into a failure instead of a stuck test.
  auto r = run_process({"/usr/bin/timeout", "60", kBin, "--fs-root", root_, "--checks", "ib,gpu,acs", "--verbose"});
  EXPECT_NE(r.exit_code, 124) << "gpudiag-health hung on the FIFO";
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(r.out.find("SECRET"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("SECRET"), std::string::npos) << r.err;
  // Each broken port is reported, not skipped.
  for (const char* port : {"mlx5_0", "mlx5_1", "mlx5_3"}) EXPECT_NE(r.out.find(port), std::string::npos) << port;
  EXPECT_NE(r.out.find("not a regular file"), std::string::npos) << r.out;
}

}  // namespace
