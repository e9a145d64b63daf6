// Slurm's SPANK interface in our own types (spank_access.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "spank/slurm/spank_access.h"

#include "spank/plan/diag_options.h"
#include "spank/slurm/plugin_args.h"

namespace gpudiag {

std::optional<std::string> SpankEnv::get(const std::string& name) {
  // On the stack: a task reads some 30 variables between fork and exec, and a heap buffer
  // each time writes heap pages the fork shares with slurmstepd (a page fault and a copy).
  char buf[kMaxDiagListBytes + 1];
  spank_err_t rc = spank_getenv(sp_, name.c_str(), buf, static_cast<int>(sizeof buf));
  if (rc == ESPANK_SUCCESS) return std::string(buf);
  if (rc == ESPANK_NOSPACE) return std::string(kUnreadableValue);  // present: the user's
  return std::nullopt;
}

bool SpankEnv::set(const std::string& name, const std::string& value) {
  return spank_setenv(sp_, name.c_str(), value.c_str(), 1) == ESPANK_SUCCESS;
}

std::string current_dir() {
  char cwd[4096];
  return ::getcwd(cwd, sizeof cwd) ? cwd : "";
}

namespace {

std::string g_diag_help;
struct spank_option kOptions[] = {
    {const_cast<char*>("diag"), const_cast<char*>("[LIST]"), nullptr, 2, 0, diag_option_cb},
};

}  // namespace

bool register_options(spank_t sp, bool all_or_fail) {
  if (g_diag_help.empty()) g_diag_help = diag_option_help();
  kOptions[0].usage = const_cast<char*>(g_diag_help.c_str());
  for (auto& opt : kOptions) {
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS && all_or_fail) {
      slurm_error("gpudiag: cannot register --%s", opt.name);
      return false;
    }
  }
  return true;
}

}  // namespace gpudiag
