#include "spank/slurm/plugin_args.h"

namespace gpudiag {

namespace {
const std::string kKnown = "config=PATH, config_cache=DIR|off";
}  // namespace

Result<PluginArgs> parse_plugin_args(const std::vector<std::string>& args) {
  PluginArgs out;
  for (const auto& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return Result<PluginArgs>::failure("gpudiag: plugstack argument '" + a + "' is not key=value (known: " + kKnown + ")");
    std::string key = a.substr(0, eq), value = a.substr(eq + 1);
    if (key == "config") {
      if (value.empty() || value[0] != '/')
        return Result<PluginArgs>::failure("gpudiag: plugstack config= needs an absolute path, not '" + value + "'");
      out.config = value;
      out.config_given = true;
    } else if (key == "config_cache") {
      if (value == "off") {
        out.config_cache.clear();
      } else if (value.size() < 2 || value[0] != '/') {
        return Result<PluginArgs>::failure("gpudiag: plugstack config_cache= needs an absolute path or off, not '" +
                                           value + "'");
      } else {
        out.config_cache = value;
      }
    } else {
      return Result<PluginArgs>::failure("gpudiag: unknown plugstack argument '" + key + "' (known: " + kKnown + ")");
    }
  }
  return out;
}

}  // namespace gpudiag
