#pragma once
// The step plan: every decision the plugin makes for a task, as one pure function of
// what it reads (the site config, the --diag list, a few variables, the Slurm ids), so
// that the rules are unit-tested and fuzzed instead of living in the module's glue.
// The glue reads Slurm items and the environment, does the I/O the plan asks for
// (claiming the diag dir, the preflight, looking at fds 1 and 2) and applies the plan.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "util/result.h"
#include "spank/plan/diag_dir.h"
#include "spank/plan/diag_options.h"
#include "spank/plan/dist_env.h"
#include "spank/plan/env_writer.h"
#include "spank/plan/hang_watch.h"
#include "spank/plan/node_addr.h"
#include "spank/plan/relay_plan.h"
#include "spank/plan/rendezvous_verdict.h"

namespace gpudiag {

// GPUDIAG_DIAG first, then --diag on top, item by item. `option` is --diag's argument
// (empty for a bare --diag), nullopt when --diag was not given. Errors are messages.
Result<DiagOptions> merge_diag_options(std::string_view from_env, const std::optional<std::string>& option);

// Whether the step's lines get the [host:rank] tag: --diag first, then the site's
// plugin.prefix ("auto": steps of more than one task).
bool prefix_wanted(const DiagOptions& d, const PluginSettings& p, int world_size);

// Batch scripts, the extern step and salloc's interactive step run no srun tasks: no
// per-task values go there (ARCHITECTURE §3).
bool step_runs_tasks(std::uint32_t step_id);

// The task's variables the plan reads (a SPANK task reads them through spank_getenv).
struct TaskEnv {
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> step_nodelist;  // SLURM_STEP_NODELIST
  std::optional<std::string> job_nodelist;   // SLURM_JOB_NODELIST
  std::optional<std::string> submit_dir;     // SLURM_SUBMIT_DIR
  std::optional<std::string> labelio;        // SLURM_LABELIO: srun --label
  std::optional<std::string> nodename;       // SLURMD_NODENAME
  std::optional<std::string> port_salt;      // SLURM_GPUDIAG_PORT_SALT (port_salt.h)
};
TaskEnv read_task_env(EnvTarget& env);

// The nodelist whose first host is MASTER_ADDR: the step's, else the job's.
std::string master_nodelist(const TaskEnv& env);

// MASTER_ADDR for the step's first node `name`, by plugin.master_addr: "name" is the
// NodeName; "address" and "auto" Slurm's address for it, "hostname" its NodeHostname,
// each falling back to the NodeName where Slurm told nothing (`slurm` nullopt).
std::string choose_master_addr(const std::string& mode, const std::string& name,
                               const std::optional<SlurmNodeAddr>& slurm);

// How long the rendezvous check waits for a name lookup (ARCHITECTURE §3).
constexpr double kRendezvousLookupDeadline = 3.0;

// The rendezvous variables the plan sets (MASTER_ADDR/PORT, PET_MASTER_ADDR/PORT), from
// the ids alone: what user_init checks once per node before the tasks get them.
EnvList planned_rendezvous_env(const PluginSettings& p, const TaskIds& ids);

// The diag dir's path by the one rule for tasks and srun's summary: dir= if given,
// else the default under the submit dir (or `cwd`).
std::string diag_dir_path(const DiagOptions& diag, const std::string& submit_dir, const std::string& cwd,
                          std::uint32_t job_id, std::uint32_t step_id);

// The short node name for the prefix, the hang report and preflight messages.
std::string short_host(const std::optional<std::string>& slurmd_nodename, const std::string& hostname);
// The same name as a view into its arguments (a forked task compares it without a copy).
std::string_view short_host_of(std::optional<std::string_view> slurmd_nodename, std::string_view hostname);

struct StepInputs {
  Config cfg;
  DiagOptions diag;   // merged by merge_diag_options
  TaskIds ids;        // from Slurm's items; master_addr already resolved from master_nodelist
  TaskEnv env;
  EnvList nccl_env;   // this node's NCCL defaults (nccl_defaults, once per step and node)
  std::string cwd;
  std::string hostname;
  uid_t uid = 0;      // the task's user: whose diag dir and hang state it is
  // What claim_diag_dir said about wanted_diag_dir(*this); nullopt: claimed.
  std::optional<DiagDirProblem> dir_problem;
  // The path claim_diag_dir resolved it to ("": not claimed, use wanted_diag_dir).
  std::string claimed_dir;
  // The task's environment, read only: a fail-fast value the user set under a torch
  // variable's old or new name is kept for both (failfast_env). Null: none set.
  EnvTarget* user_env = nullptr;
  // What gather_rendezvous found on this node, once per step (empty: nothing checked).
  std::vector<RendezvousFacts> rendezvous;
};

// The dir the task must claim before planning, or "" when the step needs none.
std::string wanted_diag_dir(const StepInputs& in);

struct StepPlan {
  std::optional<std::string> fail;    // the program must not start; every task says this
  std::vector<std::string> notices;   // lines for the user, from local task 0 only
  EnvList env;                        // for apply_env, in this order
  std::string diag_dir;               // empty: none
  bool preflight = false;
  std::string host;                   // short node name
  bool tag = false;                   // wants the output prefix (and srun --label is not on)
  std::string tag_text;               // e.g. "[node7:3]"
  HangWatch hang;                     // duration 0: no watchdog
  bool hang_asked = false;            // hang= came from the user, not only the site
};

StepPlan plan_step(const StepInputs& in);

// The step's hang duration in seconds (0: none): hang= wins over plugin.hang.duration.
double hang_seconds(const DiagOptions& d, const PluginSettings& p);

// What the task's fds 1 and 2 are (fstat, isatty): only output that slurmstepd forwards
// to srun (a pipe or socket) gets a prefix; a regular file is -o out.%t, a terminal --pty.
struct StreamFacts {
  bool out_forwarded = false, err_forwarded = false;
  bool out_tty = false, err_tty = false;
  bool operator==(const StreamFacts&) const = default;
};

struct RelayChoice {
  std::optional<RelayPlan> relay;     // nullopt: no relay at all
  std::optional<std::string> notice;  // why an asked-for watchdog is missing
};
RelayChoice plan_relay(const StepPlan& plan, int rank, const StreamFacts& streams);

}  // namespace gpudiag
