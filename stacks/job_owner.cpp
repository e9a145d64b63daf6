#include "stacks/job_owner.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/run_command.h"

namespace gpudiag {

Result<uid_t> parse_squeue_uid(std::string_view text, const std::string& job) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text.empty())
    return Result<uid_t>::failure("gpudiag: job " + job + " is not in Slurm's queue: is it still running? (squeue -j " +
                                  job + ")");
  // uid_t is 32 bits and (uid_t)-1 means "no change" to setuid: anything else is refused.
  bool ok = text.size() <= 10 && text.find_first_not_of("0123456789") == std::string_view::npos;
  unsigned long long uid = 0;
  for (char c : text) uid = uid * 10 + static_cast<unsigned>(c - '0');
  if (!ok || uid >= 0xffffffffULL)
    return Result<uid_t>::failure("gpudiag: cannot tell who owns job " + job + ": squeue printed '" +
                                  std::string(text.substr(0, 80)) + "'");
  return static_cast<uid_t>(uid);
}

Result<uid_t> job_owner(const std::string& job, double timeout_s) {
  auto r = run_command({"squeue", "--noheader", "--jobs=" + job, "--format=%U"}, timeout_s);
  if (!r.ok())
    return Result<uid_t>::failure("gpudiag: cannot tell who owns job " + job + ": " +
                                  describe_failure("squeue", r, timeout_s));
  return parse_squeue_uid(r.out, job);
}

Result<bool> become_user(uid_t uid) {
  auto fail = [&](const char* what) {
    return Result<bool>::failure("gpudiag: cannot switch to the job's owner (uid " + std::to_string(uid) + "): " + what +
                                 ": " + std::strerror(errno));
  };
  errno = 0;
  struct passwd* pw = ::getpwuid(uid);
  if (!pw) {
    if (errno == 0) errno = ENOENT;
    return fail("no such user on this host");
  }
  std::string name = pw->pw_name, home = pw->pw_dir;
  gid_t gid = pw->pw_gid;
  if (::initgroups(name.c_str(), gid) != 0) return fail("initgroups");
  if (::setgid(gid) != 0) return fail("setgid");
  if (::setuid(uid) != 0) return fail("setuid");
  if (::setuid(0) == 0) {  // must be gone for good
    errno = EPERM;
    return fail("root could be regained");
  }
  ::setenv("HOME", home.c_str(), 1);
  ::setenv("USER", name.c_str(), 1);
  ::setenv("LOGNAME", name.c_str(), 1);
  return true;
}

}  // namespace gpudiag
