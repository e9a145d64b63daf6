#pragma once
// srun's part in --diag=fabric (issue 32): the coordinator. It listens on an ephemeral
// port (SLURM_GPUDIAG_FABRIC=port:token reaches the step's tasks through their environment),
// collects every task's hello, orders the tests round by round (the reach check, the
// ring's rounds in both directions, then re-tests), judges, writes fabric.json into the
// diag dir, prints the verdict on srun's stderr and tells every task the step's fate.
// One detached thread with every signal blocked; it ends by its deadline whatever
// anyone sends, and srun's exit never waits for it (as the preflight barrier's).
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "config/config.h"
#include "fabric/fabric_wire.h"

namespace gpudiag::fabric {

struct CoordinatorSettings {
  FabricSettings cfg;
  std::uint32_t total_tasks = 0;
  std::string report_dir;  // the step's diag dir ("" none); written only if it is the user's own
  uid_t uid = 0;           // whose dir it must be
  std::string job_step;    // "JOB.STEP"
  // The plugin's rule for the diag dir (the same the tasks applied when they claimed
  // it): "" when srun may write there, else why not. Unset: the dir's own check only.
  std::function<std::string(const std::string&)> dir_check;
};

struct CoordinatorStart {
  std::optional<Endpoint> endpoint;
  std::string error;
};
CoordinatorStart start_fabric_coordinator(const CoordinatorSettings& s);

// Writes `text` as DIR/NAME: only into a real directory owned by `uid` that no one else
// may write, never through a link, never over an existing file. "" or why not.
std::string write_report_file(const std::string& dir, const std::string& name, const std::string& text, uid_t uid);

}  // namespace gpudiag::fabric
