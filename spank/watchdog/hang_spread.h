#pragma once
// A hang seen on one node is a hang of the whole step (issue 17.6): the rank that really
// stalled is often on another node, so every node must dump its stacks before anything
// is killed, or its stacks are lost when the first node's kill tears the step down.
//
// The mechanism is Slurm's own: the relay whose watchdog fires runs
// `scancel --signal=URG --quiet JOB.STEP` (no shell, a deadline). slurmctld hands the
// signal to the slurmstepd of every node of the step, which signals every process of
// the step. Each node's relays learn of it (see start_spread_listener) and take the node's marker as if their own
// watchdog had fired; whoever takes it dumps the node's tasks. The programs see SIGURG
// too; its default action is to ignore it, nothing sends it to a program that did not
// ask for it (F_SETOWN on a socket), and Go's runtime treats it as a spurious preemption.
// Why not srun --overlap of a dump command: a new step needs slurmctld to create it and
// slurmd to launch it on every node (seconds), needs the gpudiag binary's path, and
// leaves a step to clean up when it hangs; a signal needs none of that.
//
// Who can send it: Slurm lets only the job's owner (and its admins) signal a step, and
// the kernel lets only the same user signal the relay: nobody gains a way to end a
// step they could not already end. A user may send it by hand (scancel --signal=URG):
// every node then writes its report (and, with action kill, the step ends).
//
// Two watchdogs that fire together: each node's marker (hang_watchdog.h) is created
// exclusively, so each node writes its report once. Only one of them signals: the one
// that creates hang.declared (exclusively, in the step's private diag dir, which the
// nodes share when it lies on a shared file system); it names the node that declared.
//
// Before the kill, each node waits until every node's report is in the diag dir (when
// that dir is shared), or until a deadline after which another node's report cannot
// come anyway: nothing is killed while another node may still be looking at its tasks.
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "stacks/step_processes.h"

namespace gpudiag {

constexpr int kSpreadSignal = SIGURG;
constexpr double kSpreadTimeout = 2.0;  // scancel: slurmctld answers in milliseconds when it is up
// How long after a node declared another node can still be starting its report: the
// signal's way through slurmctld and slurmd, and the relay's tick (once a second).
constexpr double kSpreadLatency = 2.5;
constexpr const char* kDeclaredName = "hang.declared";

// Pure: the command that signals every node of `step` ("JOB.STEP").
std::vector<std::string> spread_argv(const std::string& step);
// Pure: how many nodes' hang reports are among a diag dir's file names
// (hang.<host>.txt, or hang.<host>.<random>.txt where that name was taken).
int reported_nodes(const std::vector<std::string>& names);
// Pure: whether a node stops waiting for the others' reports and goes on to the kill.
bool stop_waiting(int reported, int nodes, double now, double deadline);

// The relay's SIGURG handler (async-signal-safe: it sets a flag). Installed once.
void catch_spread_signal();
// Slurm signals every process of a step except those named slurmstepd (its kill_tree
// and proctrack plugins skip them, so as not to signal slurmstepd itself), and the relay
// is a fork of slurmstepd with that name. So each relay forks a listener, a child with a
// name of its own that does nothing but pass SIGURG on to the relay. It dies with the
// relay (PR_SET_PDEATHSIG) and is not part of the task's program tree, so no hang report
// lists it. 0 when it cannot be forked (then only the node's own watchdog can fire).
// Its name, kSpreadListenerName, lives with the stack collector that leaves it out.
pid_t start_spread_listener();
void stop_spread_listener(pid_t pid);
// True once per signal received since the last call.
bool take_spread_request();

// Signals every node of the step. "" when Slurm took it, else why not (for a message).
std::string spread_hang(const std::string& step);

}  // namespace gpudiag
