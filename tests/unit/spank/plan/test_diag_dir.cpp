// The diag dir rule (issue 21.2): the step's dir is the user's own or none.
#include <sys/xattr.h>
#include <cstring>
#include <cstdint>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "spank/plan/diag_dir.h"

using namespace gpudiag;
namespace fs = std::filesystem;

TEST(DiagDir, OneDefaultRuleForTasksAndSrun) {
  EXPECT_EQ(default_diag_dir("/home/u/run", "/elsewhere", 12, 3), "/home/u/run/gpudiag-12.3");
  EXPECT_EQ(default_diag_dir("", "/home/u/cwd", 12, 3), "/home/u/cwd/gpudiag-12.3");
  EXPECT_EQ(default_diag_dir("", "", 12, 3), "/tmp/gpudiag-12.3");
  EXPECT_EQ(default_diag_dir("/", "", 12, 3), "/gpudiag-12.3");
}

TEST(DiagDir, OnlyARealDirOfTheUserThatNoOneElseWrites) {
  DirFacts own{true, false, true, 1000, S_IFDIR | 0700};
  EXPECT_FALSE(distrust_diag_dir(own, 1000));
  DirFacts old = own;
  old.mode = S_IFDIR | 0755;  // what earlier versions made: still the user's alone
  EXPECT_FALSE(distrust_diag_dir(old, 1000));
  EXPECT_EQ(*distrust_diag_dir(own, 1001), "belongs to another user (uid 1000), not to you (uid 1001)");
  DirFacts open = own;
  open.mode = S_IFDIR | 0777;
  EXPECT_EQ(*distrust_diag_dir(open, 1000), "is writable by others (mode 0777)");
  open.mode = S_IFDIR | 0770;
  EXPECT_TRUE(distrust_diag_dir(open, 1000));
  DirFacts link{true, true, false, 1000, S_IFLNK | 0777};
  EXPECT_EQ(*distrust_diag_dir(link, 1000), "is a symbolic link, not a directory made by you");
  DirFacts file{true, false, false, 1000, S_IFREG | 0600};
  EXPECT_EQ(*distrust_diag_dir(file, 1000), "exists and is not a directory");
}

class DiagDirFs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-diagdir-XXXXXX";
    ASSERT_TRUE(::mkdtemp(tmpl));
    root = tmpl;
  }
  void TearDown() override { fs::remove_all(root); }
  std::string root;
};

TEST_F(DiagDirFs, CreatesPrivateAndAcceptsItsOwnTwice) {
  std::string dir = root + "/gpudiag-1.0";
  EXPECT_FALSE(claim_diag_dir(dir, ::getuid()));
  struct stat st;
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // A sibling task of the same step: EEXIST, then the same check passes.
  EXPECT_FALSE(claim_diag_dir(dir, ::getuid()));
}

TEST_F(DiagDirFs, RefusesASymlinkAWorldWritableDirAndAnotherUsersDir) {
  std::string target = root + "/elsewhere";
  fs::create_directory(target);
  fs::create_directory_symlink(target, root + "/link");
  std::string link = root + "/link";
  auto p = claim_diag_dir(link, ::getuid());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, DiagDirProblem::kNotYours);
  EXPECT_EQ(p->why, "the diag dir " + root + "/link is a symbolic link, not a directory made by you");
  std::string open = root + "/open";
  fs::create_directory(open);
  ::chmod(open.c_str(), 0777);
  p = claim_diag_dir(open, ::getuid());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->why, "the diag dir " + open + " is writable by others (mode 0777)");
  p = claim_diag_dir(target, ::getuid() + 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, DiagDirProblem::kNotYours);
}

TEST_F(DiagDirFs, ControlBytesInTheNameAreRefusedBeforeAnythingIsMade) {
  std::string dir = root + "/sub\x1b[2Jdir/gpudiag-1.0";
  auto p = claim_diag_dir(dir, ::getuid());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, DiagDirProblem::kBadName);
  EXPECT_EQ(p->why.find('\x1b'), std::string::npos);
}

TEST(DiagDir, WhatATaskDoesAboutAProblem) {
  DiagDirProblem create{DiagDirProblem::kCannotCreate, "cannot create the diag dir /etc/x: Permission denied"};
  DiagDirProblem theirs{DiagDirProblem::kNotYours, "the diag dir /shared/gpudiag-1.0 is writable by others (mode 0777)"};
  auto v = judge_diag_dir_problem(create, false, true, false);
  EXPECT_TRUE(v.fail_task);
  EXPECT_EQ(v.message, "gpudiag: cannot create the diag dir /etc/x: Permission denied: pick a writable one with "
                       "--diag=dir=PATH");
  // The default dir held by a neighbour: the step runs without it, and says why.
  v = judge_diag_dir_problem(theirs, false, true, false);
  EXPECT_FALSE(v.fail_task);
  EXPECT_EQ(v.message, "gpudiag: no NCCL log files and no hang report for this step: the diag dir "
                       "/shared/gpudiag-1.0 is writable by others (mode 0777): pick a directory of your own with "
                       "--diag=dir=PATH");
  // A dir the user named must work.
  EXPECT_TRUE(judge_diag_dir_problem(theirs, true, true, true).fail_task);
  // Only the site's watchdog wanted it: never fail the job.
  v = judge_diag_dir_problem(create, false, false, true);
  EXPECT_FALSE(v.fail_task);
  // Issue 21 A1: a neighbour who takes the dir's name must not switch the watchdog off.
  EXPECT_EQ(v.message.rfind("gpudiag: the hang watchdog stays on, its report goes to the task's stderr: cannot "
                            "create the diag dir /etc/x", 0),
            0u)
      << v.message;
  v = judge_diag_dir_problem(theirs, false, true, true);
  EXPECT_FALSE(v.fail_task);
  EXPECT_EQ(v.message, "gpudiag: no NCCL log files for this step; the hang watchdog stays on, its report goes to the "
                       "task's stderr: the diag dir /shared/gpudiag-1.0 is writable by others (mode 0777): pick a "
                       "directory of your own with --diag=dir=PATH");
  // A9: the name is the user's, and the message reaches slurmd's log.
  DiagDirProblem forged{DiagDirProblem::kCannotCreate, "cannot create the diag dir /x\n[ts] error: FORGED: No such file"};
  EXPECT_EQ(judge_diag_dir_problem(forged, true, true, false).message.find('\n'), std::string::npos);
}

// Issue 21 A3: a dir is only as safe as its ancestors, since NCCL opens its logs by path.
TEST(DiagDir, AncestorsOthersCanRewriteAreRefused) {
  std::vector<AncestorFacts> safe = {{"/home/u/run", 1000, S_IFDIR | 0755}, {"/home/u", 1000, S_IFDIR | 0700},
                                     {"/home", 0, S_IFDIR | 0755}, {"/", 0, S_IFDIR | 0755}};
  EXPECT_FALSE(distrust_ancestors(safe, 1000));
  std::vector<AncestorFacts> tmp = {{"/tmp", 0, S_IFDIR | 01777}, {"/", 0, S_IFDIR | 0755}};
  EXPECT_FALSE(distrust_ancestors(tmp, 1000));  // sticky: no one renames another's entry
  std::vector<AncestorFacts> group = {{"/proj/ml", 0, S_IFDIR | 02770, 4242, "proj-ml"}, {"/proj", 0, S_IFDIR | 0755}};
  EXPECT_EQ(*distrust_ancestors(group, 1000), "lies in /proj/ml, which the members of group proj-ml may write and "
                                              "which is not sticky (mode 2770), so another user could replace it");
  std::vector<AncestorFacts> theirs = {{"/shared/atk", 1001, S_IFDIR | 0755}, {"/shared", 0, S_IFDIR | 01777}};
  EXPECT_EQ(*distrust_ancestors(theirs, 1000),
            "lies in /shared/atk, which belongs to another user (uid 1001), who could replace it");
  // Even sticky, the owner of a dir may remove anything in it.
  std::vector<AncestorFacts> sticky_theirs = {{"/shared", 1001, S_IFDIR | 01777}};
  EXPECT_TRUE(distrust_ancestors(sticky_theirs, 1000));
}

// Issue 30: a project dir (2770) whose group the admin lists in
// plugin.diag_dir_trusted_groups; only that group, and only its write bit, is trusted.
TEST(DiagDir, AProjectDirOfAGroupTheAdminTrustsIsAccepted) {
  std::vector<AncestorFacts> project = {{"/proj/ml", 0, S_IFDIR | 02770, 4242, "proj-ml"},
                                        {"/proj", 0, S_IFDIR | 0755}, {"/", 0, S_IFDIR | 0755}};
  EXPECT_FALSE(distrust_ancestors(project, 1000, {4242}));
  EXPECT_TRUE(distrust_ancestors(project, 1000, {4243})) << "another group's trust does not carry over";
  EXPECT_TRUE(distrust_ancestors(project, 1000)) << "no trust unless the admin says so";
  // Everyone may write it: the group's trust does not cover the rest of the users.
  std::vector<AncestorFacts> open = {{"/proj/ml", 0, S_IFDIR | 02777, 4242, "proj-ml"}};
  EXPECT_EQ(*distrust_ancestors(open, 1000, {4242}),
            "lies in /proj/ml, which others may write and which is not sticky (mode 2777), so another user could "
            "replace it");
  // Its owner (not root, not the user) may still do anything with it.
  std::vector<AncestorFacts> owned = {{"/proj/ml", 1001, S_IFDIR | 02770, 4242, "proj-ml"}};
  EXPECT_TRUE(distrust_ancestors(owned, 1000, {4242}));
  // A group without a name is named by its number.
  std::vector<AncestorFacts> nameless = {{"/proj/x", 0, S_IFDIR | 0770, 777, ""}};
  EXPECT_NE(distrust_ancestors(nameless, 1000)->find("the members of group 777 may write"), std::string::npos);
}

// The admin trusts the group proj-ml; an ACL on the project dir also lets a user outside
// it write (setfacl -m u:outsider:rwx): the mode's group bits are the ACL's mask then, so
// the dir looked like "only the group may write" and was accepted (adversary pass).
TEST(DiagDir, AnAclsNamedUsersAreNotTheTrustedGroup) {
  AncestorFacts acl{"/proj/ml", 0, S_IFDIR | 02770, 4242, "proj-ml"};
  acl.extended_acl = true;
  EXPECT_EQ(*distrust_ancestors({acl}, 1000, {4242}),
            "lies in /proj/ml, which the members of group proj-ml and the users and groups its ACL names may write "
            "and which is not sticky (mode 2770), so another user could replace it");
  acl.mode = S_IFDIR | 0750;  // the mask grants no write: no entry may write
  EXPECT_FALSE(distrust_ancestors({acl}, 1000, {4242}));
  acl.mode = S_IFDIR | 03770;  // sticky: nobody replaces what is not theirs
  EXPECT_FALSE(distrust_ancestors({acl}, 1000, {4242}));
}

// The same read from a real directory: an access ACL naming a user (written as the
// kernel's xattr, so no setfacl is needed) is seen; a plain mode is not an ACL.
TEST(DiagDir, AnAccessAclOnARealAncestorIsSeen) {
  char tmpl[] = "/tmp/gpudiag_acl_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, sub = dir + "/gpudiag-1.0";
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  EXPECT_FALSE(read_ancestor_facts(sub).front().extended_acl);
  // posix_acl_xattr: version 2, then (tag, perm, id): USER_OBJ rwx, USER 65534 rwx,
  // GROUP_OBJ rwx, MASK rwx, OTHER ---.
  struct __attribute__((packed)) Entry {
    std::uint16_t tag, perm;
    std::uint32_t id;
  };
  struct __attribute__((packed)) {
    std::uint32_t version = 2;
    Entry e[5] = {{0x01, 7, ~0u}, {0x02, 7, 65534}, {0x04, 7, ~0u}, {0x10, 7, ~0u}, {0x20, 0, ~0u}};
  } xattr;
  const bool set = ::setxattr(dir.c_str(), "system.posix_acl_access", &xattr, sizeof xattr, 0) == 0;
  const int err = errno;
  if (set) {
    EXPECT_TRUE(read_ancestor_facts(sub).front().extended_acl);
  }
  ::rmdir(dir.c_str());
  if (!set) GTEST_SKIP() << "no POSIX ACLs on /tmp here: " << std::strerror(err);
}

TEST(DiagDir, ARefusedSharedDirSaysHowToChooseAnother) {
  DiagDirProblem shared{DiagDirProblem::kSharedAncestor,
                        "the diag dir /proj/ml/gpudiag-1.0 lies in /proj/ml, which the members of group proj-ml may "
                        "write and which is not sticky (mode 2770), so another user could replace it"};
  auto v = judge_diag_dir_problem(shared, false, true, false);
  EXPECT_FALSE(v.fail_task);
  EXPECT_EQ(v.message, "gpudiag: no NCCL log files and no hang report for this step: " + shared.why +
                           ": pick a directory of your own outside it with --diag=dir=PATH (e.g. "
                           "--diag=dir=$HOME/gpudiag), or ask your admin to trust the group with "
                           "plugin.diag_dir_trusted_groups");
  EXPECT_TRUE(judge_diag_dir_problem(shared, true, true, false).fail_task) << "a dir the user named must work";
}

TEST_F(DiagDirFs, AGroupWritableParentIsRefusedAndAResolvedPathIsUsed) {
  std::string group = root + "/proj";
  fs::create_directory(group);
  ::chmod(group.c_str(), 02770);
  std::string dir = group + "/gpudiag-1.0";
  auto p = claim_diag_dir(dir, ::getuid());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, DiagDirProblem::kSharedAncestor);
  EXPECT_NE(p->why.find("lies in " + group + ", which the members of group "), std::string::npos) << p->why;
  EXPECT_NE(p->why.find(" may write and which is not sticky (mode 2770)"), std::string::npos) << p->why;
  // The admin trusts the dir's group: the same dir is claimed.
  struct stat st;
  ASSERT_EQ(::stat(group.c_str(), &st), 0);
  EXPECT_FALSE(claim_diag_dir(dir, ::getuid(), {st.st_gid}));
  // A link on the way is resolved once: the step then uses the real path.
  std::string mine = root + "/mine";
  fs::create_directory(mine);
  fs::create_directory_symlink(mine, root + "/via");
  std::string named = root + "/via/d";
  EXPECT_FALSE(claim_diag_dir(named, ::getuid()));
  EXPECT_EQ(named, fs::canonical(mine).string() + "/d");
}

TEST(DiagDir, SrunRefusesANamedDirTheUserCannotWrite) {
  EXPECT_EQ(*judge_named_dir("/data", {true, false, true, false}),
            "gpudiag: --diag: you cannot write to the diag dir /data: pick a writable one with --diag=dir=PATH");
  EXPECT_EQ(*judge_named_dir("/etc/x", {false, false, true, false}),
            "gpudiag: --diag: cannot create the diag dir /etc/x: you cannot write to its parent: pick a writable "
            "one with --diag=dir=PATH");
  EXPECT_FALSE(judge_named_dir("/scratch/me/d", {true, true, true, true}));
  EXPECT_FALSE(judge_named_dir("/scratch/me/d", {false, false, true, true}));
  // Not visible from srun's host: the tasks decide.
  EXPECT_FALSE(judge_named_dir("/local/d", {false, false, false, false}));
}
