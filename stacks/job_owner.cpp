#include "stacks/job_owner.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
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

std::vector<std::string> owner_environment(const std::vector<std::string>& ours, const std::string& name,
                                           const std::string& home) {
  static const char* const kKept[] = {"PATH", "SLURM_CONF", "SLURM_CLUSTERS", "LANG", "LANGUAGE", "TZ"};
  std::vector<std::string> env;
  for (const auto& entry : ours) {
    const std::string var = entry.substr(0, entry.find('='));
    if (var.size() == entry.size()) continue;
    bool keep = var.rfind("LC_", 0) == 0;
    for (const char* k : kKept) keep = keep || var == k;
    if (keep) env.push_back(entry);
  }
  env.push_back("HOME=" + home);
  env.push_back("USER=" + name);
  env.push_back("LOGNAME=" + name);
  return env;
}

Result<ChildUser> owner_credentials(uid_t uid, const std::vector<std::string>& our_env) {
  auto fail = [&](const char* what) {
    return Result<ChildUser>::failure("gpudiag: cannot switch to the job's owner (uid " + std::to_string(uid) +
                                      "): " + what + ": " + std::strerror(errno));
  };
  errno = 0;
  struct passwd* pw = ::getpwuid(uid);
  if (!pw) {
    if (errno == 0) errno = ENOENT;
    return fail("no such user on this host");
  }
  ChildUser u;
  u.uid = uid;
  u.gid = pw->pw_gid;
  const std::string name = pw->pw_name, home = pw->pw_dir;
  int n = 64;
  for (int tries = 0; tries < 8; ++tries) {
    u.groups.resize(static_cast<std::size_t>(n));
    int want = n;
    if (::getgrouplist(name.c_str(), u.gid, u.groups.data(), &want) >= 0) {
      u.groups.resize(static_cast<std::size_t>(want));
      u.env = owner_environment(our_env, name, home);
      return u;
    }
    n = want > n ? want : n * 2;
  }
  errno = E2BIG;
  return fail("getgrouplist");
}

}  // namespace gpudiag
