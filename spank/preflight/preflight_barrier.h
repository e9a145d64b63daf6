#pragma once
// The preflight barrier (issue 17.5): under --diag=preflight no program starts on any
// node while one node fails. srun coordinates: it listens on an ephemeral TCP port and
// hands `port:token:proof` to the tasks (SLURM_GPUDIAG_PREFLIGHT_BARRIER; a setenv in srun's
// local_user_init reaches the step's environment, checked on 22.05; the name starts with
// SLURM_ because srun passes only those on under --export=NONE, where the healthy nodes
// once started the program with no barrier: adversary review 14). Each task, after its
// checks in task_init, connects to $SLURM_LAUNCH_NODE_IPADDR:port, says `ok` or `fail`,
// and an `ok` task waits for srun's verdict: `go` once every task of the step said ok,
// `stop NODE` as soon as one failed. Another user may connect and send anything: the
// token decides, reads are bounded, every wait has a deadline, and srun's exit never
// waits for the thread. Another user may also hold the port once srun's server has closed
// it, and then reads a late task's report, token and all: so a verdict carries a second
// secret, the proof, which no task ever sends (adversary review 14). The parsers and the
// verdict rule are pure.
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace gpudiag {

inline constexpr const char* kBarrierEnv = "SLURM_GPUDIAG_PREFLIGHT_BARRIER";
// The name gpudiag used before: an srun that sets it runs an older gpudiag than the node.
inline constexpr const char* kOldBarrierEnv = "GPUDIAG_PREFLIGHT_BARRIER";
inline constexpr std::size_t kBarrierLineMax = 512;  // a report or a verdict, newline included
// How long a task that passed waits for the other tasks' preflights (srun serves a little
// longer): the launch of every node of the step must fit in it.
inline constexpr double kBarrierWait_s = 60;

struct BarrierEndpoint {
  int port = 0;
  std::string token;  // 32 lowercase hex digits: the tasks' reports carry it
  std::string proof;  // 32 lowercase hex digits: srun's verdicts carry it
};
std::string format_barrier_env(const BarrierEndpoint& e);
std::optional<BarrierEndpoint> parse_barrier_env(const std::string& value);

// A task's report: "gpudiag-barrier TOKEN RANK ok|fail NODE\n".
struct BarrierReport {
  std::string token;
  std::uint32_t rank = 0;
  bool passed = false;
  std::string node;
};
std::string format_barrier_report(const BarrierReport& r);
// One line without its newline; nullopt for anything else (the node name must be
// printable and short: it reaches the user's terminal).
std::optional<BarrierReport> parse_barrier_report(const std::string& line);

// Whether the step has no srun to coordinate it: `srun --async` (Slurm 26.05) returns once
// the step is accepted, never runs local_user_init, and the step manager launches the
// tasks with SLURM_STEP_LAUNCHER_PORT=0 (seen on 26.05.5; a step launched by srun has
// srun's port there). Pure: the variable's value, nullopt when unset (older releases set
// it for every srun step; unset is not taken for "no srun").
bool step_has_no_srun(const std::optional<std::string>& step_launcher_port);

// srun's answer: "go PROOF\n" or "stop PROOF NODE\n".
struct BarrierVerdict {
  bool go = false;
  std::string failed_node;  // with !go
  std::string proof;        // the endpoint's proof: from srun, not from whoever holds its port
};
std::string format_barrier_verdict(const BarrierVerdict& v);
std::optional<BarrierVerdict> parse_barrier_verdict(const std::string& line);

// What srun has heard so far; the rule: the first failure stops every task, all `total`
// ranks ok lets them go, anything else waits.
struct BarrierTally {
  std::uint32_t total = 0;
  std::set<std::uint32_t> passed;
  std::string failed_node;  // the first node that failed
};
void tally_report(BarrierTally& t, const BarrierReport& r);
std::optional<BarrierVerdict> barrier_verdict(const BarrierTally& t);

// srun: listens and serves the step's tasks on a detached thread until every task has
// its verdict or `deadline_s` passes. Returns the endpoint to hand to the tasks, or an
// error message (the step then runs without the barrier).
struct BarrierStart {
  std::optional<BarrierEndpoint> endpoint;
  std::string error;
};
BarrierStart start_barrier_server(std::uint32_t total_tasks, double deadline_s);

// A task: reports to srun and, when `passed`, waits for the verdict. `srun_addr` is
// $SLURM_LAUNCH_NODE_IPADDR.
struct BarrierOutcome {
  enum Kind { kGo, kStop, kUnreachable, kNoVerdict } kind = kUnreachable;
  std::string failed_node;  // kStop
  std::string detail;       // kUnreachable, kNoVerdict: why
};
BarrierOutcome await_barrier(const std::string& srun_addr, const BarrierEndpoint& e, const BarrierReport& report,
                             double connect_s, double deadline_s);

// Pure: whether a task that reached the barrier may start its program. Only on srun's go.
// A task that cannot reach srun does not start either: a flood of connections on srun's
// port looks just like a firewall, and no program may start while another node failed.
bool barrier_allows_start(bool passed, BarrierOutcome::Kind kind);

}  // namespace gpudiag
