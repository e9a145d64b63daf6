#pragma once
// slurm.conf's ProctrackType as slurmstepd holds it: libslurm's global `slurm_conf`
// (exported by libslurmfull, 22.05 and 24.11 checked), found at run time so that a Slurm
// without it loads the plugin all the same. Its type, slurm_conf_t, comes from this
// build's own <slurm/slurm.h>, and Slurm loads the plugin only into its own release,
// so the layout matches. Included only by the plugin module, after <slurm/slurm.h>;
// call it in slurmstepd (S_CTX_REMOTE), where the configuration is loaded.
#include <dlfcn.h>

#include <optional>
#include <string>

namespace gpudiag::slurm_compat {

inline std::optional<std::string> proctrack_type() {
  const auto* conf = static_cast<const slurm_conf_t*>(::dlsym(RTLD_DEFAULT, "slurm_conf"));
  if (!conf || !conf->proctrack_type || !*conf->proctrack_type) return std::nullopt;
  return std::string(conf->proctrack_type);
}

}  // namespace gpudiag::slurm_compat
