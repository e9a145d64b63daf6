#pragma once
// The output relay (ARCHITECTURE §3): the task process splits in two. The child goes back to
// Slurm, which execs the user program in it; the parent becomes the relay. It must be
// the task process itself, because slurmstepd waits only for the processes it forked
// and then kills the whole step: a relay that were a sibling or child of the user
// program would lose the tail of the output.
//
// The relay reads the child's stdout and stderr on separate pipes, tags each line
// (LinePrefixer), writes stdout to stdout and stderr to stderr, drains both to EOF,
// reaps the child and exits as it did: the same code, or death by the same signal.
#include <optional>
#include <string>

#include "spank/plan/relay_plan.h"
#include "spank/relay/line_prefixer.h"

namespace gpudiag {

// Returns in the child, with fds 1/2 now leading to the relay; the caller goes on to
// exec the user program. The parent never returns. On failure (pipes, fork) nothing
// has changed and the result is a message: run the task without a relay.
//
// Signals: the relay catches every signal one may send a step (SIGTERM, SIGINT, SIGUSR1,
// SIGALRM, SIGTSTP, the real-time ones, ...; the list and what is left out are in
// output_relay.cpp) and forwards those someone sent to it alone. Those from the kernel (a terminal) reach every process
// of the step already; so do those from slurmstepd (scancel, srun's Ctrl-C, time limits)
// unless plan.forward_stepd_signals says they reach the relay alone.
std::optional<std::string> start_relay(const RelayPlan& plan);

}  // namespace gpudiag
