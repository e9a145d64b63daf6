// The hang watchdog's steps in the diag dir, each done by a child with a deadline: here
// on a dir that answers (that it does them as the relay did before); a dir that does not
// answer is HangWatchdog.ADiagDirThatDoesNotAnswerDoesNotHoldBackTheKill.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "spank/watchdog/hang_diag_dir.h"
#include "tests/unit/slurp.h"

using namespace gpudiag;
using gpudiag::test::slurp;

namespace {

struct TmpDir {
  std::string path;
  TmpDir() {
    char tmpl[] = "/tmp/gpudiag-hangdir-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TmpDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

}  // namespace

TEST(HangDiagDir, ListsEveryNameEvenPastOneReadOfTheDir) {
  TmpDir d;
  // More names than one getdents64 buffer holds.
  for (int i = 0; i < 1500; ++i) std::ofstream(d.path + "/hang.node" + std::to_string(i) + ".txt") << "x";
  HangDiagDir dir(d.path, 5);
  std::vector<std::string> names;
  ASSERT_TRUE(dir.names(names));
  EXPECT_EQ(names.size(), 1502u);  // and . and ..
  EXPECT_NE(std::find(names.begin(), names.end(), "hang.node1499.txt"), names.end());
  EXPECT_TRUE(dir.answering());
}

TEST(HangDiagDir, ReportsAreNewPrivateFilesAndATakenNameGetsAnother) {
  TmpDir d;
  HangDiagDir dir(d.path, 5);
  std::string why;
  const std::string first = dir.write_report("n1", "report one\n", why);
  EXPECT_EQ(first, d.path + "/hang.n1.txt") << why;
  const std::string second = dir.write_report("n1", "report two\n", why);
  ASSERT_NE(second, "") << why;
  EXPECT_NE(second, first);
  EXPECT_EQ(second.rfind(d.path + "/hang.n1.", 0), 0u);
  EXPECT_EQ(slurp(first), "report one\n");
  EXPECT_EQ(slurp(second), "report two\n");
  struct stat st;
  ASSERT_EQ(::stat(second.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(HangDiagDir, OneNodeClaimsTheDeclarationAndTheOthersReadItsName) {
  TmpDir d;
  HangDiagDir a(d.path, 5), b(d.path, 5);
  EXPECT_TRUE(a.claim_declared("n7"));
  EXPECT_FALSE(b.claim_declared("n8"));
  EXPECT_EQ(b.declared_by(), "n7");
}

TEST(HangDiagDir, TorchIsAskedThroughItsOwnFifoOnly) {
  TmpDir d;
  const std::string fifo = d.path + "/fr_pipe.rank0.pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(d.path + "/fr_pipe.rank1.pipe") << "";  // a plain file is not torch's pipe
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  HangDiagDir dir(d.path, 5);
  EXPECT_FALSE(dir.ask_torch({1}));
  EXPECT_TRUE(dir.ask_torch({0, 1}));
  char buf[8] = {};
  EXPECT_EQ(::read(reader, buf, sizeof buf), 2);
  EXPECT_STREQ(buf, "1\n");
  ::close(reader);
}

TEST(HangDiagDir, ADirThatIsNotPrivateOrMissingIsNamed) {
  TmpDir d;
  std::string why;
  HangDiagDir none("", 5);
  EXPECT_EQ(none.write_report("n1", "r", why), "");
  EXPECT_EQ(why, "this step has no diag dir (see the message at its start)");
  EXPECT_TRUE(none.claim_declared("n1"));  // a few signals too many, never none
  ::chmod(d.path.c_str(), 0777);
  HangDiagDir open_dir(d.path, 5);
  EXPECT_EQ(open_dir.write_report("n1", "r", why), "");
  EXPECT_EQ(why, "the diag dir " + d.path + " is no longer this user's private directory");
  HangDiagDir missing(d.path + "/gone", 5);
  EXPECT_EQ(missing.write_report("n1", "r", why), "");
  EXPECT_EQ(why, "cannot open the diag dir " + d.path + "/gone: No such file or directory");
  EXPECT_TRUE(missing.answering());
}
