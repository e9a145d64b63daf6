#pragma once
// The diag dir: where a --diag step's NCCL logs, hang reports and dumps go. The default
// name ($SLURM_SUBMIT_DIR/gpudiag-<job>.<step>) is predictable, and a submit dir may be
// shared (mode 1777): another user can create it first, full of symlinks. So the dir a
// step uses must be the user's own: made by the task, or already there as a real
// directory owned by the user that no one else may write (issue 21.2).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <sys/types.h>

namespace gpudiag {

// The one rule for the default name, used by the tasks and by srun's summary alike:
// under the submit dir, else under the caller's working dir, else under /tmp.
std::string default_diag_dir(const std::string& submit_dir, const std::string& cwd, std::uint32_t job_id,
                             std::uint32_t step_id);

// What lstat says about an existing path (no symlink is followed).
struct DirFacts {
  bool exists = false;
  bool is_symlink = false;
  bool is_dir = false;
  uid_t owner = 0;
  mode_t mode = 0;
};

DirFacts read_dir_facts(const std::string& dir);

// Empty when `facts` describe a dir the user `uid` may trust; otherwise why not, as
// the end of a message that starts "gpudiag: the diag dir PATH ".
std::optional<std::string> distrust_diag_dir(const DirFacts& facts, uid_t uid);

// What stat says about each ancestor of a dir, from its parent up to /, after realpath
// resolved every link on the way.
struct AncestorFacts {
  std::string path;
  uid_t owner = 0;
  mode_t mode = 0;
  gid_t group = 0;
  std::string group_name;  // "" where the group has no name
  // An access ACL with named users or groups: the mode's group bits are then its mask,
  // which covers those entries too, not the owning group alone.
  bool extended_acl = false;
};
std::vector<AncestorFacts> read_ancestor_facts(const std::string& resolved_dir);

// The gids of the groups the admin trusts with shared dirs (plugin.diag_dir_trusted_groups);
// a name that names no group is left out.
std::vector<gid_t> group_ids(const std::vector<std::string>& names);

// Empty when no one but `uid` and root can rename or replace anything on the way to the
// dir; otherwise why not, naming the ancestor (issue 21 A3). NCCL opens its log files by
// path, so a dir checked once and used by name later is only as safe as its ancestors:
// in a parent that others may write and that is not sticky (a group project dir, mode
// 2770), another user renames the checked dir away and puts their own in its place.
// The rule is OpenSSH's StrictModes: every ancestor is owned by root or the user, and
// one that group or others may write must be sticky (/tmp, 1777). One exception, which
// only the admin can make: a dir that its group may write (not others) is accepted when
// that group is in `trusted_groups`, since its members are then trusted not to swap the
// user's dir (a project dir, 2770, whose group the site vouches for).
std::optional<std::string> distrust_ancestors(const std::vector<AncestorFacts>& ancestors, uid_t uid,
                                              const std::vector<gid_t>& trusted_groups = {});

// Why a dir cannot be the step's: `why` completes "gpudiag: ..." and names the dir.
struct DiagDirProblem {
  // kSharedAncestor: the dir is the user's, but an ancestor others may rewrite.
  enum Kind { kCannotCreate, kNotYours, kBadName, kSharedAncestor } kind;
  std::string why;
};

// Creates `dir` (0700) as the calling user, or accepts it if it exists and
// distrust_diag_dir has nothing against it; then its ancestors must pass
// distrust_ancestors, and `dir` becomes its real path, so that no link on the way
// (which another user might own) is followed again later. mkdir first, then lstat: tasks of one step
// on one node race to create it, and EEXIST from a sibling task is then checked like
// any other existing dir. A name with control bytes is refused before anything is made
// (it could reach no task's environment). Runs as the user, never as root.
std::optional<DiagDirProblem> claim_diag_dir(std::string& dir, uid_t uid, const std::vector<gid_t>& trusted_groups = {});

// srun's early look at a dir the user named, as the user, before anything launches:
// a dir that is there and not writable (or whose parent is there and not writable)
// fails now, in srun, instead of in every task. A path srun cannot see at all is left
// to the tasks: it may exist only on the compute nodes.
struct NamedDirFacts {
  bool exists = false, writable = false;
  bool parent_exists = false, parent_writable = false;
};
NamedDirFacts read_named_dir_facts(const std::string& dir);
std::optional<std::string> judge_named_dir(const std::string& dir, const NamedDirFacts& f);

// What a task does about a diag dir it could not claim.
struct DiagDirVerdict {
  bool fail_task = false;  // the program must not start
  std::string message;     // one line for the user (empty: none)
};
// `named`: the user gave dir=PATH; `asked`: the user asked for --diag (not only the
// site's hang watchdog); `hang`: the step has a hang watchdog. A dir the user named, or
// one that cannot be created, fails a --diag step before launch: the user asked for
// diagnostics. The default dir, when a neighbour holds it or its name is unusable, is
// only skipped: the step runs, without NCCL log files, and says why. The watchdog never
// depends on the dir (issue 21 A1: a neighbour who takes the name must not switch it
// off): without one its report goes to the task's stderr, and the message says so.
DiagDirVerdict judge_diag_dir_problem(const DiagDirProblem& p, bool named, bool asked, bool hang);

}  // namespace gpudiag
