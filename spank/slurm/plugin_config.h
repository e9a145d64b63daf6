#pragma once
// The config named on the plugstack line, as srun, slurmstepd, sbatch and slurmd read it
// on every step: from the config cache (config/config_cache.h) when it holds this very
// file, else the YAML through gpudiag_yaml.so (next to gpudiag.so, loaded only then).
//
// The cache dir (plugstack `config_cache=DIR`, default /run/gpudiag; `off`: none) is
// root's: read only when it and the cache are root's and no one else may write them,
// written only by root (slurmstepd's init, slurmd's). Its readers include every user's
// srun, so it is readable by all only where every user may read the config by its path,
// else root's alone. A user's srun never writes one; a planted or stale cache is never
// read (docs/SECURITY.md).
#include <string>

#include "config/config.h"
#include "spank/slurm/plugin_args.h"
#include "util/result.h"

namespace gpudiag {

// Loads the config named by the plugstack arguments. Errors are messages.
Result<Config> load_plugin_config(int ac, char** av);

// The steps of load_plugin_config for one file, for the tests and the bench.
enum class ConfigLoad { cache, yaml, yaml_cached, failed };
struct ConfigCachePlace {
  std::string dir;          // "": no cache
  std::string yaml_module;  // gpudiag_yaml.so
  bool may_write = false;   // root, and not a user's srun
};
Result<Config> load_config_cached(const std::string& path, const ConfigCachePlace& place, long long now_ns,
                                  ConfigLoad* how = nullptr);

}  // namespace gpudiag
