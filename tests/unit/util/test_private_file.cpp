// The one home of private files (util/private_file.h), against real temporary dirs and
// what a hostile neighbour plants in them: links, FIFOs, taken names, a dir of someone
// else's, a dir that is a link, a filesystem that refuses a write halfway. Each rule is
// tested here once; its callers' tests (HangDiagDir.*, DiagDir.*, RunStateTest.*,
// FabricReportFile.*, StepReports.*) check what they do with it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "util/private_file.h"

using namespace gpudiag;
namespace fs = std::filesystem;

namespace {

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-private-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
    dfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dfd, 0);
    // A FIFO opened by mistake would block the test: end it instead of hanging ctest.
    ::alarm(60);
  }
  void TearDown() override {
    ::alarm(0);
    if (dfd >= 0) ::close(dfd);
    fs::remove_all(root);
  }
  // What the dir holds under `name`, read through its fd as the callers do.
  std::string slurp(const std::string& name) const {
    std::string out;
    const int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char buf[65536];
    for (ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    if (fd >= 0) ::close(fd);
    return out;
  }
  mode_t mode_of(const std::string& name) const {
    struct stat st;
    EXPECT_EQ(::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0) << name;
    return st.st_mode & 07777;
  }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(root), fs::directory_iterator()));
  }
  std::string root;
  int dfd = -1;
};

using PrivateFile = PrivateDirTest;
using AtomicFileTest = PrivateDirTest;

Result<bool> write_file_atomically(const std::string& path, std::string_view data, mode_t mode) {
  return gpudiag::write_file_atomically(place_of(path), data, mode, kFileTimeoutS);
}

// Writes fail past `bytes` (EFBIG, as ENOSPC would) while it lives.
struct FileSizeLimit {
  rlimit old{};
  struct sigaction old_action {};
  explicit FileSizeLimit(rlim_t bytes) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &old_action);
    ::getrlimit(RLIMIT_FSIZE, &old);
    rlimit l = old;
    l.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::sigaction(SIGXFSZ, &old_action, nullptr);
  }
};

}  // namespace

TEST(PrivateFileRules, APrivateDirIsARealDirOfTheUserThatNoOneElseMayWrite) {
  const uid_t me = 1000;
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0700, me, me), DirVerdict::ok);
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0755, me, me), DirVerdict::ok);  // others may read the diag dir
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0770, me, me), DirVerdict::open_to_others);
  EXPECT_EQ(judge_private_dir(S_IFDIR | 01777, me, me), DirVerdict::open_to_others);
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0700, me + 1, me), DirVerdict::other_owner);
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0700, 0, me), DirVerdict::other_owner);  // not even root's
  EXPECT_EQ(judge_private_dir(S_IFLNK | 0777, me, me), DirVerdict::link);
  EXPECT_EQ(judge_private_dir(S_IFREG | 0600, me, me), DirVerdict::not_dir);
  EXPECT_EQ(judge_private_dir(S_IFIFO | 0600, me, me), DirVerdict::not_dir);
  // The watchdog's state dir: no access at all for anyone else.
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0700, me, me, DirPrivacy::no_other_access), DirVerdict::ok);
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0750, me, me, DirPrivacy::no_other_access), DirVerdict::open_to_others);
  EXPECT_EQ(judge_private_dir(S_IFDIR | 0701, me, me, DirPrivacy::no_other_access), DirVerdict::open_to_others);
}

TEST(PrivateFileRules, ANameIsOnePlainNameNeverAPath) {
  EXPECT_TRUE(is_plain_name("hang.n1.txt"));
  EXPECT_TRUE(is_plain_name(".n.json.tmp.1.abc"));
  EXPECT_TRUE(is_plain_name("..."));
  for (std::string_view bad : {std::string_view(""), std::string_view("."), std::string_view(".."),
                               std::string_view("a/b"), std::string_view("../x"), std::string_view("/etc/passwd"),
                               std::string_view("x/"), std::string_view("a\0b", 3)})
    EXPECT_FALSE(is_plain_name(bad)) << bad;
}

TEST(PrivateFileRules, APathSplitsIntoItsDirAndAName) {
  auto p = place_of("/var/lib/gpudiag/n1.json");
  EXPECT_EQ(p.dir, "/var/lib/gpudiag");
  EXPECT_EQ(p.name, "n1.json");
  EXPECT_EQ(p.shown, "/var/lib/gpudiag/n1.json");
  EXPECT_EQ(place_of("m.prom").dir, ".");
  EXPECT_EQ(place_of("/m.prom").dir, "/");
  EXPECT_EQ(place_of("dir/").name, "");  // no file name: the writer refuses it
  auto w = gpudiag::write_file_atomically(place_of("/tmp/"), "x", 0644, kFileTimeoutS);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error(), "gpudiag: cannot write /tmp/: not a file name");
}

TEST(PrivateFileRules, RandomNamesDifferAndKeepTheirStemAndSuffix) {
  auto names = random_names("hang.n1.", ".txt", 16);
  ASSERT_EQ(names.size(), 16u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), 16u);
  for (const auto& n : names) {
    ASSERT_EQ(n.size(), std::string("hang.n1.").size() + 6 + 4) << n;
    EXPECT_EQ(n.rfind("hang.n1.", 0), 0u);
    EXPECT_EQ(n.substr(n.size() - 4), ".txt");
    EXPECT_TRUE(is_plain_name(n));
  }
}

TEST_F(PrivateFile, ANewFileIsExclusive0600AndRegular) {
  const mode_t old = ::umask(022);
  const int fd = create_new_file(dfd, "report.txt");
  ::umask(old);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, "x", 1), 1);
  ::close(fd);
  EXPECT_EQ(mode_of("report.txt"), 0600u);
  // Never an existing name, not even the caller's own file.
  EXPECT_EQ(create_new_file(dfd, "report.txt"), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(slurp("report.txt"), "x");
  // Never a path: nothing is made outside the dir.
  EXPECT_EQ(create_new_file(dfd, "../escaped"), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(fs::exists(fs::path(root).parent_path() / "escaped"));
}

TEST_F(PrivateFile, APlantedSymlinkIsNeverFollowed) {
  const std::string victim = root + "/victim";
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::symlink(victim.c_str(), (root + "/hang.n1.txt").c_str()), 0);
  ASSERT_EQ(::symlink((root + "/not-yet").c_str(), (root + "/dangling").c_str()), 0);
  EXPECT_EQ(create_new_file(dfd, "hang.n1.txt"), -1);
  EXPECT_EQ(errno, EEXIST);
  // A dangling link would have made its target with O_CREAT alone.
  EXPECT_EQ(create_new_file(dfd, "dangling"), -1);
  EXPECT_FALSE(fs::exists(root + "/not-yet"));
  EXPECT_EQ(open_own_file(dfd, "hang.n1.txt", true), -1);
  EXPECT_EQ(open_own_file(dfd, "dangling", true), -1);
  EXPECT_FALSE(fs::exists(root + "/not-yet"));
  const OpenedFile r = open_regular_file(dfd, "hang.n1.txt");
  EXPECT_EQ(r.fd, -1);
  EXPECT_EQ(r.why, OpenedFile::link);
  EXPECT_EQ(slurp("victim"), "precious");
  // A taken name moves on to the next: the report lands beside the link, not through it.
  std::vector<std::string> names = {"hang.n1.txt"};
  for (auto& n : random_names("hang.n1.", ".txt", 4)) names.push_back(n);
  const NewWrite w = write_new_file(dfd, names, "stacks\n");
  ASSERT_EQ(w.step, NewWrite::done) << std::strerror(w.err);
  EXPECT_EQ(w.name, 1u);
  EXPECT_EQ(slurp(names[1]), "stacks\n");
  EXPECT_EQ(slurp("victim"), "precious");
}

TEST_F(PrivateFile, APlantedFifoNeverBlocksAndIsNeverUsedAsAFile) {
  ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0666), 0);
  EXPECT_EQ(create_new_file(dfd, "fifo"), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(open_own_file(dfd, "fifo", true), -1);  // no reader: ENXIO at once, never a wait
  const OpenedFile r = open_regular_file(dfd, "fifo");
  EXPECT_EQ(r.fd, -1);
  EXPECT_EQ(r.why, OpenedFile::not_regular);
  EXPECT_EQ(read_owned_file(dfd, "fifo", ::geteuid(), 64).why, "not a file of the job's owner");
  // With a reader holding it open, a writer's open would succeed: still refused.
  const int reader = ::open((root + "/fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(open_own_file(dfd, "fifo", false), -1);
  EXPECT_EQ(errno, EINVAL);
  // Torch's pipe: only the owner's FIFO is written to.
  const int fifo = open_owned_fifo(dfd, "fifo", ::geteuid());
  EXPECT_GE(fifo, 0);
  if (fifo >= 0) ::close(fifo);
  EXPECT_EQ(open_owned_fifo(dfd, "fifo", ::geteuid() + 1), -1);
  ::close(reader);
  { std::ofstream(root + "/plain") << "x"; }
  EXPECT_EQ(open_owned_fifo(dfd, "plain", ::geteuid()), -1);
}

TEST_F(PrivateFile, ADirThatIsALinkOrHasOneOnItsPathIsRefused) {
  fs::create_directories(root + "/real/sub");
  ASSERT_EQ(::symlink((root + "/real").c_str(), (root + "/link").c_str()), 0);
  // O_DIRECTORY|O_NOFOLLOW on a link: the kernel says ENOTDIR (ELOOP without O_DIRECTORY).
  EXPECT_EQ(open_dir_fd((root + "/link").c_str()), -1);
  EXPECT_EQ(errno, ENOTDIR);
  // The last component only (the diag dir: realpath resolved the rest before) ...
  const int through = open_dir_fd((root + "/link/sub").c_str(), DirLinks::last);
  EXPECT_GE(through, 0);
  if (through >= 0) ::close(through);
  // ... or nowhere on the path (--output's and the run state's dir, chosen by an admin).
  EXPECT_EQ(open_dir_fd((root + "/link/sub").c_str(), DirLinks::anywhere), -1);
  EXPECT_EQ(errno, ELOOP);
  const DirOpen d = open_private_dir((root + "/link").c_str(), ::geteuid());
  EXPECT_EQ(d.fd, -1);
  EXPECT_FALSE(d.not_private);
  EXPECT_EQ(d.err, ENOTDIR);
  { std::ofstream(root + "/file") << "x"; }
  EXPECT_EQ(open_private_dir((root + "/file").c_str(), ::geteuid()).err, ENOTDIR);
}

TEST_F(PrivateFile, ADirOfAnotherOwnerOrThatOthersMayWriteIsRefused) {
  const std::string dir = root + "/d";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  DirOpen mine = open_private_dir(dir.c_str(), ::geteuid());
  ASSERT_GE(mine.fd, 0);
  ::close(mine.fd);
  // Someone else's: as root a real chown; the rule itself either way.
  uid_t other = ::geteuid() + 1;
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    other = 0;
  }
  DirOpen theirs = open_private_dir(dir.c_str(), other);
  EXPECT_EQ(theirs.fd, -1);
  EXPECT_TRUE(theirs.not_private);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(dir.c_str(), 0, 0), 0);
  }
  for (mode_t open_mode : {0770, 0702, 01777}) {
    ASSERT_EQ(::chmod(dir.c_str(), open_mode), 0);
    DirOpen o = open_private_dir(dir.c_str(), ::geteuid());
    EXPECT_EQ(o.fd, -1) << std::oct << open_mode;
    EXPECT_TRUE(o.not_private);
  }
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  const int fd = open_dir_fd(dir.c_str());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(is_private_dir_fd(fd, ::geteuid()));
  EXPECT_FALSE(is_private_dir_fd(fd, ::geteuid(), DirPrivacy::no_other_access));
  ::close(fd);
}

TEST_F(PrivateFile, AReplaceLeavesTheOldOrTheNewNeverHalf) {
  const std::string oldtext(64 * 1024, 'o'), newtext(64 * 1024, 'n');
  ASSERT_EQ(replace_file(dfd, "m.prom", random_names(".m.tmp.", "", 4), oldtext, 0644).step, Replace::done);
  // One writer (a child) replaces the file over and over; this process reads it.
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    for (int i = 0; i < 30; ++i)
      if (replace_file(dfd, "m.prom", random_names(".m.tmp.", "", 4), i % 2 ? oldtext : newtext, 0644).step !=
          Replace::done)
        ::_exit(1);
    ::_exit(0);
  }
  int reads = 0, halves = 0;
  for (;;) {
    int status = 0;
    const bool done = ::waitpid(writer, &status, WNOHANG) == writer;
    const std::string seen = slurp("m.prom");
    ++reads;
    if (seen != oldtext && seen != newtext) ++halves;
    if (done) {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      break;
    }
  }
  EXPECT_EQ(halves, 0) << "of " << reads << " reads";
  EXPECT_EQ(mode_of("m.prom"), 0644u);
  EXPECT_EQ(entries(), 1u);  // no temporary file left
}

TEST_F(PrivateFile, AWriteThatFailsHalfwayKeepsTheOldFileAndLeavesNoTemporary) {
  // RLIMIT_FSIZE makes the write fail partway, as a full filesystem (ENOSPC) would.
  ASSERT_EQ(replace_file(dfd, "n.json", random_names(".n.tmp.", "", 4), "old\n", 0600).step, Replace::done);
  const std::string big(64 * 1024, 'x');
  Replace r;
  NewWrite w;
  {
    FileSizeLimit limit(4096);
    r = replace_file(dfd, "n.json", random_names(".n.tmp.", "", 4), big, 0600);
    w = write_new_file(dfd, {"hang.n1.txt"}, big);
  }
  EXPECT_EQ(r.step, Replace::write);
  EXPECT_EQ(r.err, EFBIG);
  EXPECT_EQ(slurp("n.json"), "old\n");
  // The report's writer says so (its caller then prints the report on stderr).
  EXPECT_EQ(w.step, NewWrite::write);
  EXPECT_EQ(w.err, EFBIG);
  EXPECT_EQ(entries(), 2u);  // n.json and the partial report: no temporary file
}

TEST_F(PrivateFile, AReplaceNeverGoesThroughALinkOrOverANonFile) {
  const std::string victim = root + "/victim";
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::symlink(victim.c_str(), (root + "/link.prom").c_str()), 0);
  EXPECT_EQ(replace_file(dfd, "link.prom", random_names(".t.", "", 2), "x", 0644).step, Replace::target_is_link);
  ASSERT_EQ(::mkfifo((root + "/fifo.prom").c_str(), 0600), 0);
  EXPECT_EQ(replace_file(dfd, "fifo.prom", random_names(".t.", "", 2), "x", 0644).step, Replace::target_not_regular);
  EXPECT_EQ(slurp("victim"), "precious");
  // Every temporary name taken (by links a neighbour planted): refused, nothing followed.
  auto temps = random_names(".t.", "", 2);
  for (const auto& t : temps) ASSERT_EQ(::symlink(victim.c_str(), (root + "/" + t).c_str()), 0);
  const Replace r = replace_file(dfd, "new.prom", temps, "x", 0644);
  EXPECT_EQ(r.step, Replace::create_temp);
  EXPECT_EQ(r.err, EEXIST);
  EXPECT_EQ(slurp("victim"), "precious");
  EXPECT_FALSE(fs::exists(root + "/new.prom"));
}

TEST_F(PrivateFile, AnOwnFileIsRewrittenFromItsStart) {
  int fd = open_own_file(dfd, "task.0", true);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "12345\n", 6), 6);
  ::close(fd);
  fd = open_own_file(dfd, "task.0", false);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "7\n", 2), 2);
  ::close(fd);
  EXPECT_EQ(slurp("task.0"), "7\n");
  EXPECT_EQ(mode_of("task.0"), 0600u);
  EXPECT_EQ(open_own_file(dfd, "missing", false), -1);
  EXPECT_EQ(errno, ENOENT);
  const OpenedFile r = open_regular_file(dfd, "task.0");
  ASSERT_GE(r.fd, 0);
  char buf[16] = {};
  EXPECT_EQ(read_up_to(r.fd, buf, sizeof buf - 1), 2);
  ::close(r.fd);
}

// The one rule both readers of a step's diag dir use (stacks/verdict/): a regular file
// of the owner, read up to the bound; a link, a FIFO and another owner's file are
// refused without blocking.
TEST(OwnedFile, OnlyARegularFileOfTheOwnerUpToTheBound) {
  char tmpl[] = "/tmp/gpudiag-owned-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  { std::ofstream(dir + "/plain") << "0123456789"; }
  ASSERT_EQ(::symlink((dir + "/plain").c_str(), (dir + "/link").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  auto whole = read_owned_file(dfd, "plain", ::geteuid(), 64);
  EXPECT_TRUE(whole.read);
  EXPECT_EQ(whole.bytes, "0123456789");
  EXPECT_EQ(read_owned_file(dfd, "plain", ::geteuid(), 4).bytes, "0123");
  EXPECT_FALSE(read_owned_file(dfd, "link", ::geteuid(), 64).read);
  auto fifo = read_owned_file(dfd, "fifo", ::geteuid(), 64);
  EXPECT_FALSE(fifo.read);
  EXPECT_EQ(fifo.why, "not a file of the job's owner");
  EXPECT_FALSE(read_owned_file(dfd, "plain", ::geteuid() + 1, 64).read);
  EXPECT_FALSE(read_owned_file(dfd, "missing", ::geteuid(), 64).read);
  ::close(dfd);
  for (const char* n : {"plain", "link", "fifo"}) ::unlink((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());
}

// The writer of --output and the run state: the rules above in a child with a deadline.
TEST_F(AtomicFileTest, WritesWithTheModeWhateverTheUmask) {
  const mode_t old = ::umask(077);
  auto w = write_file_atomically(root + "/m.prom", "a 1\n", 0644);
  ::umask(old);
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(slurp("m.prom"), "a 1\n");
  EXPECT_EQ(mode_of("m.prom"), 0644u);
  ASSERT_TRUE(write_file_atomically(root + "/m.prom", "a 2\n", 0644));
  EXPECT_EQ(slurp("m.prom"), "a 2\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(root), fs::directory_iterator()), 1);
}

TEST_F(AtomicFileTest, RefusesSymlinksAndNonFiles) {
  const std::string target = root + "/victim";
  { std::ofstream(target) << "precious"; }
  ASSERT_EQ(::symlink(target.c_str(), (root + "/link.prom").c_str()), 0);
  auto w = write_file_atomically(root + "/link.prom", "x", 0644);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().find("symlink"), std::string::npos);
  EXPECT_EQ(slurp("victim"), "precious");
  fs::create_directory(root + "/dir.prom");
  auto d = write_file_atomically(root + "/dir.prom", "x", 0644);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().find("not a regular file"), std::string::npos);
  auto missing = write_file_atomically(root + "/no/such/dir/x.prom", "x", 0644);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().rfind("gpudiag: cannot write ", 0), 0u) << missing.error();
}

TEST_F(AtomicFileTest, ASymlinkedDirectoryOnThePathIsRefused) {
  // Issue 30: the directory of --output was followed. A link as the directory, or
  // anywhere above it, could aim root's write into a place its owner chose.
  const std::string real = root + "/real";
  fs::create_directories(real + "/sub");
  ASSERT_EQ(::symlink(real.c_str(), (root + "/link").c_str()), 0);
  for (const std::string& path : {root + "/link/x.prom", root + "/link/sub/x.prom"}) {
    auto w = write_file_atomically(path, "x", 0644);
    ASSERT_FALSE(w) << path;
    EXPECT_NE(w.error().find("is a symlink or has one on its path: not used (give the real path"), std::string::npos)
        << w.error();
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(real), fs::directory_iterator()), 1);  // sub/ only
  EXPECT_TRUE(fs::is_empty(real + "/sub"));
  // The real path works, relative paths too.
  ASSERT_TRUE(write_file_atomically(real + "/sub/x.prom", "x", 0644));
}
