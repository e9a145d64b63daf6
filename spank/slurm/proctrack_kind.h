#pragma once
// Whom slurmstepd signals when someone signals a step (scancel, scancel --signal, srun's
// Ctrl-C, srun/sbatch --signal before the time limit): it depends on the node's
// ProctrackType, and it decides whether the output relay passes such a signal on.
//
// - proctrack/linuxproc signals the task's whole process tree, skipping processes named
//   slurmstepd (the relay is one); proctrack/pgid signals the task's process group, which
//   the program shares with the relay. The program gets it directly: the relay must not
//   pass it on, or the program gets it twice.
// - proctrack/cgroup signals only slurmstepd's own children ("any child of slurmstepd is a
//   slurm task", proctrack_cgroup.c, 22.05 to 24.11): that is the relay, not the program.
//   The relay must pass it on, or the program never gets it (only KillWait's SIGKILL,
//   which Slurm sends to every process of the step).
#include <optional>
#include <string>

namespace gpudiag {

enum class StepSignalReach {
  kProgram,    // slurmstepd's signals reach the program itself
  kRelayOnly,  // they reach only slurmstepd's children: the relay passes them on
};

struct SignalReachVerdict {
  StepSignalReach reach = StepSignalReach::kProgram;
  std::optional<std::string> notice;  // for slurmd's log: the type was unknown or unreadable
};

// Pure. `proctrack_type` is slurm.conf's ProctrackType as slurmstepd holds it
// ("proctrack/cgroup"); nullopt when it could not be read. An unknown or unreadable type
// is taken as kProgram: every other proctrack plugin Slurm ships signals every process
// of the step, and it is what the relay did before it knew about cgroup.
SignalReachVerdict step_signal_reach(const std::optional<std::string>& proctrack_type);

}  // namespace gpudiag
