#pragma once
// Slurm's SPANK interface in our own types, for every context: the job's environment as an
// EnvTarget, items, the config named on the plugstack line, and the --diag option's table.
// Module-only: included after <slurm/spank.h>.
#include <optional>
#include <string>

#include "config/config.h"
#include "spank/slurm/plugin_config.h"
#include "spank/plan/env_writer.h"
#include "util/result.h"

namespace gpudiag {

// The task's environment as slurmstepd holds it (spank_getenv / spank_setenv).
class SpankEnv : public EnvTarget {
 public:
  explicit SpankEnv(spank_t sp) : sp_(sp) {}
  std::optional<std::string> get(const std::string& name) override;
  bool set(const std::string& name, const std::string& value) override;

 private:
  spank_t sp_;
};

template <class T>
bool item(spank_t sp, spank_item_t what, T& out) {
  return spank_get_item(sp, what, &out) == ESPANK_SUCCESS;
}

std::string current_dir();

// --diag's callback, routed by context (dispatch.cpp).
int diag_option_cb(int val, const char* optarg, int remote);

// Every option in one table, registered in a loop (the model is pyxis), with the parser's
// own list of items as the help text. `all_or_fail`: stop at the first that Slurm refuses
// and say so (false: register what can be, silently). Returns whether all were registered.
bool register_options(spank_t sp, bool all_or_fail);

}  // namespace gpudiag
