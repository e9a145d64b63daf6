#include "spank/diag_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "spank/env_writer.h"

namespace gpudiag {

std::string default_diag_dir(const std::string& submit_dir, const std::string& cwd, std::uint32_t job_id,
                             std::uint32_t step_id) {
  std::string base = !submit_dir.empty() ? submit_dir : !cwd.empty() ? cwd : std::string("/tmp");
  if (base.back() != '/') base += '/';
  return base + "gpudiag-" + std::to_string(job_id) + "." + std::to_string(step_id);
}

std::optional<std::string> distrust_diag_dir(const DirFacts& f, uid_t uid) {
  if (!f.exists) return std::string("does not exist");
  if (f.is_symlink) return std::string("is a symbolic link, not a directory made by you");
  if (!f.is_dir) return std::string("exists and is not a directory");
  if (f.owner != uid)
    return "belongs to another user (uid " + std::to_string(f.owner) + "), not to you (uid " + std::to_string(uid) + ")";
  if (f.mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(f.mode & 07777));
    return std::string("is writable by others (mode ") + mode + ")";
  }
  return std::nullopt;
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

std::optional<DiagDirProblem> claim_diag_dir(const std::string& dir, uid_t uid) {
  if (!safe_env_value(dir))
    return DiagDirProblem{DiagDirProblem::kBadName, "the diag dir name holds control characters (from the submit dir?)"};
  if (::mkdir(dir.c_str(), 0700) == 0) return std::nullopt;
  if (errno != EEXIST)
    return DiagDirProblem{DiagDirProblem::kCannotCreate, "cannot create the diag dir " + dir + ": " + std::strerror(errno)};
  if (auto why = distrust_diag_dir(read_dir_facts(dir), uid))
    return DiagDirProblem{DiagDirProblem::kNotYours, "the diag dir " + dir + " " + *why};
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
    return "gpudiag: --diag: you cannot write to the diag dir " + dir + ": pick a writable one with --diag=dir=PATH";
  if (!f.exists && f.parent_exists && !f.parent_writable)
    return "gpudiag: --diag: cannot create the diag dir " + dir +
           ": you cannot write to its parent: pick a writable one with --diag=dir=PATH";
  return std::nullopt;
}

DiagDirVerdict judge_diag_dir_problem(const DiagDirProblem& p, bool named, bool asked) {
  const char* fix = p.kind == DiagDirProblem::kCannotCreate ? "pick a writable one with --diag=dir=PATH"
                                                             : "pick a directory of your own with --diag=dir=PATH";
  if (!asked) return {false, "gpudiag: no hang watchdog for this step: " + p.why + " (" + fix + ")"};
  if (named || p.kind == DiagDirProblem::kCannotCreate) return {true, "gpudiag: " + p.why + ": " + fix};
  return {false, "gpudiag: no NCCL log files and no hang report for this step: " + p.why + ": " + fix};
}

}  // namespace gpudiag
