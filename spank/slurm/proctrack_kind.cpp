#include "spank/slurm/proctrack_kind.h"

#include "util/control_bytes.h"

namespace gpudiag {

SignalReachVerdict step_signal_reach(const std::optional<std::string>& proctrack_type) {
  SignalReachVerdict v;
  if (!proctrack_type) {
    v.notice =
        "gpudiag: cannot read ProctrackType in slurmstepd (libslurm's slurm_conf not found): the output relay "
        "assumes that Slurm signals every process of a step (as proctrack/linuxproc and pgid do) and does not pass "
        "slurmstepd's signals on; under proctrack/cgroup, programs of steps with more than one task would miss "
        "scancel's signals: report this Slurm build to gpudiag";
    return v;
  }
  const std::string& type = *proctrack_type;
  if (type == "proctrack/cgroup") {
    v.reach = StepSignalReach::kRelayOnly;
  } else if (type != "proctrack/linuxproc" && type != "proctrack/pgid") {
    v.notice = "gpudiag: unknown ProctrackType '" + escape_control(type) +
               "': the output relay assumes that it signals every process of a step (as proctrack/linuxproc and "
               "pgid do) and does not pass slurmstepd's signals on; if the programs of steps with more than one "
               "task miss scancel's signals, report this plugin to gpudiag";
  }
  return v;
}

}  // namespace gpudiag
