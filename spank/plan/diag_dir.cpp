#include "spank/plan/diag_dir.h"

#include <grp.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "util/control_bytes.h"
#include "util/private_file.h"

namespace gpudiag {

std::string default_diag_dir(const std::string& submit_dir, const std::string& cwd, std::uint32_t job_id,
                             std::uint32_t step_id) {
  std::string base = !submit_dir.empty() ? submit_dir : !cwd.empty() ? cwd : std::string("/tmp");
  if (base.back() != '/') base += '/';
  return base + "gpudiag-" + std::to_string(job_id) + "." + std::to_string(step_id);
}

std::optional<std::string> distrust_diag_dir(const DirFacts& f, uid_t uid) {
  if (!f.exists) return std::string("does not exist");
  // The rule is util/private_file.h's; the words are the diag dir's.
  const mode_t type = f.is_symlink ? S_IFLNK : f.is_dir ? S_IFDIR : S_IFREG;
  switch (judge_private_dir(type | (f.mode & 07777), f.owner, uid)) {
    case DirVerdict::ok: return std::nullopt;
    case DirVerdict::link: return std::string("is a symbolic link, not a directory made by you");
    case DirVerdict::not_dir: return std::string("exists and is not a directory");
    case DirVerdict::other_owner:
      return "belongs to another user (uid " + std::to_string(f.owner) + "), not to you (uid " + std::to_string(uid) + ")";
    case DirVerdict::open_to_others: break;
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(f.mode & 07777));
  return std::string("is writable by others (mode ") + mode + ")";
}

DirFacts read_dir_facts(const std::string& dir) {
  DirFacts f;
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return f;
  f.exists = true;
  f.is_symlink = S_ISLNK(st.st_mode);
  f.is_dir = S_ISDIR(st.st_mode);
  f.owner = st.st_uid;
  f.mode = st.st_mode;
  return f;
}

std::optional<std::string> distrust_ancestors(const std::vector<AncestorFacts>& ancestors, uid_t uid,
                                              const std::vector<gid_t>& trusted_groups) {
  for (const auto& a : ancestors) {
    if (a.owner != 0 && a.owner != uid)
      return "lies in " + escape_control(a.path) + ", which belongs to another user (uid " + std::to_string(a.owner) +
             "), who could replace it";
    if (a.mode & S_ISVTX) continue;
    // The admin trusts a group's members: an ACL's named users and groups are not them.
    const bool trusted_group =
        !a.extended_acl && std::find(trusted_groups.begin(), trusted_groups.end(), a.group) != trusted_groups.end();
    if ((a.mode & S_IWOTH) || ((a.mode & S_IWGRP) && !trusted_group)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(a.mode & 07777));
      std::string who = "others";
      if (!(a.mode & S_IWOTH))
        who = "the members of group " + (a.group_name.empty() ? std::to_string(a.group) : escape_control(a.group_name)) +
              (a.extended_acl ? " and the users and groups its ACL names" : "");
      return "lies in " + escape_control(a.path) + ", which " + who + " may write and which is not sticky (mode " + mode +
             "), so another user could replace it";
    }
  }
  return std::nullopt;
}

std::vector<gid_t> group_ids(const std::vector<std::string>& names) {
  std::vector<gid_t> out;
  std::vector<char> buf(16384);
  for (const auto& name : names) {
    group g, *found = nullptr;
    if (::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) == 0 && found) out.push_back(found->gr_gid);
  }
  return out;
}

std::vector<AncestorFacts> read_ancestor_facts(const std::string& resolved_dir) {
  std::vector<AncestorFacts> out;
  std::string path = resolved_dir;
  while (path.size() > 1) {
    auto slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
    struct stat st;
    AncestorFacts a;
    a.path = path;
    // A parent we cannot stat is reported as nobody's: refused, never trusted blindly.
    if (::stat(path.c_str(), &st) == 0) {
      a.owner = st.st_uid;
      a.mode = st.st_mode;
      a.group = st.st_gid;
      std::vector<char> buf(16384);
      group g, *found = nullptr;
      if (::getgrgid_r(st.st_gid, &g, buf.data(), buf.size(), &found) == 0 && found) a.group_name = found->gr_name;
      // Filesystems keep an ACL that only repeats the mode as the mode alone, so any
      // access ACL there names someone; one that cannot be read counts as one.
      const ssize_t acl = ::getxattr(path.c_str(), "system.posix_acl_access", nullptr, 0);
      a.extended_acl = acl > 0 || (acl < 0 && errno != ENODATA && errno != ENOTSUP);
    } else {
      a.owner = static_cast<uid_t>(-1);
    }
    out.push_back(a);
  }
  return out;
}

std::optional<DiagDirProblem> claim_diag_dir(std::string& dir, uid_t uid, const std::vector<gid_t>& trusted_groups) {
  if (!is_one_printable_line(dir))
    return DiagDirProblem{DiagDirProblem::kBadName, "the diag dir name holds control characters (from the submit dir?)"};
  if (::mkdir(dir.c_str(), kPrivateDirMode) != 0) {
    if (errno != EEXIST)
      return DiagDirProblem{DiagDirProblem::kCannotCreate, "cannot create the diag dir " + dir + ": " + std::strerror(errno)};
    if (auto why = distrust_diag_dir(read_dir_facts(dir), uid))
      return DiagDirProblem{DiagDirProblem::kNotYours, "the diag dir " + dir + " " + *why};
  }
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real))
    return DiagDirProblem{DiagDirProblem::kCannotCreate, "cannot resolve the diag dir " + dir + ": " + std::strerror(errno)};
  if (auto why = distrust_ancestors(read_ancestor_facts(real), uid, trusted_groups))
    return DiagDirProblem{DiagDirProblem::kSharedAncestor, "the diag dir " + dir + " " + *why};
  dir = real;
  return std::nullopt;
}

NamedDirFacts read_named_dir_facts(const std::string& dir) {
  NamedDirFacts f;
  struct stat st;
  f.exists = ::stat(dir.c_str(), &st) == 0;
  f.writable = f.exists && ::access(dir.c_str(), W_OK | X_OK) == 0;
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::string parent = path.substr(0, path.find_last_of('/'));
  if (parent.empty()) parent = "/";
  f.parent_exists = ::stat(parent.c_str(), &st) == 0;
  f.parent_writable = f.parent_exists && ::access(parent.c_str(), W_OK | X_OK) == 0;
  return f;
}

std::optional<std::string> judge_named_dir(const std::string& dir, const NamedDirFacts& f) {
  if (f.exists && !f.writable)
    return "gpudiag: --diag: you cannot write to the diag dir " + escape_control(dir) + ": pick a writable one with --diag=dir=PATH";
  if (!f.exists && f.parent_exists && !f.parent_writable)
    return "gpudiag: --diag: cannot create the diag dir " + escape_control(dir) +
           ": you cannot write to its parent: pick a writable one with --diag=dir=PATH";
  return std::nullopt;
}

DiagDirVerdict judge_diag_dir_problem(const DiagDirProblem& p, bool named, bool asked, bool hang) {
  const char* fix = p.kind == DiagDirProblem::kCannotCreate ? "pick a writable one with --diag=dir=PATH"
                    : p.kind == DiagDirProblem::kSharedAncestor
                        ? "pick a directory of your own outside it with --diag=dir=PATH (e.g. --diag=dir=$HOME/gpudiag), "
                          "or ask your admin to trust the group with plugin.diag_dir_trusted_groups"
                        : "pick a directory of your own with --diag=dir=PATH";
  // The dir's name comes from the user (dir=, the submit dir) and goes to slurmd's log.
  const std::string why = escape_control(p.why);
  if (!asked)
    return {false, "gpudiag: the hang watchdog stays on, its report goes to the task's stderr: " + why + " (" + fix + ")"};
  if (named || p.kind == DiagDirProblem::kCannotCreate) return {true, "gpudiag: " + why + ": " + fix};
  if (hang)
    return {false, "gpudiag: no NCCL log files for this step; the hang watchdog stays on, its report goes to the "
                   "task's stderr: " + why + ": " + fix};
  return {false, "gpudiag: no NCCL log files and no hang report for this step: " + why + ": " + fix};
}

}  // namespace gpudiag
