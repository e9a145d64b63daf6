#pragma once
// A task's plan made before the fork (ARCHITECTURE §3, issue 34). user_init plans each local
// task of the step once, in slurmstepd, where the work costs nothing per fork; the forked
// task takes its plan only where plan_step and apply_env would decide exactly the same in
// it (task_may_use), and else plans itself as before. A plan that needs the task itself
// (a diag dir to claim, the preflight, the hang watchdog, a refusal) is never prepared.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spank/plan/env_writer.h"
#include "spank/plan/step_plan.h"

namespace gpudiag {

// One variable of the task's environment that the plan read, and what it found there.
struct EnvRead {
  std::string name;
  std::optional<std::string> value;  // nullopt: unset
};

struct PreparedTask {
  TaskIds ids;             // as plan_step got them
  TaskEnv env;             // the task variables as the job's environment held them in user_init
  std::string hostname;
  // MASTER_ADDR came from user_init's own choice: the task's nodelist no longer decides it.
  bool master_addr_fixed = false;
  std::vector<EnvRead> reads;  // every other variable plan_step and apply_env read
  EnvList sets;                // what apply_env set, in its order (GPUDIAG_INJECTED last)
  StepPlan plan;
  // The output relay chosen ahead for the usual streams (kPreparedStreams), and the message
  // that hands them to the node's relay thread (node_relay_wire.h; empty: none made ahead).
  // A task whose streams differ chooses in the task, as before.
  std::optional<RelayPlan> relay;
  std::string handoff;
};

// A task's streams as most steps have them: both forwarded to srun, neither a terminal.
constexpr StreamFacts kPreparedStreams{true, true, false, false};

// What a prepared plan holds in root's slurmstepd: its strings' bytes. The user chooses
// the variables it copies (up to 8 KiB each), so a step's plans are bounded together:
// past kPreparedStepBudget no task is prepared and each plans itself, in its own memory
// (adversary review 3, B2). A plain task's plan is about 4.5 KiB: 2 MiB holds a node's 256
// tasks, and fewer than 32 plans of a user's 8 KiB values.
std::size_t prepared_bytes(const PreparedTask& p);
constexpr std::size_t kPreparedStepBudget = 2u << 20;

// The job's environment as user_init reads it for all the local tasks' plans: each name
// from `real` once, then from memory (the plans write nothing to it). A task's plan reads
// some 25 variables, each a scan of the job's environment through spank_getenv, and
// user_init runs before any task of the node may start.
class ReadOnceEnv : public EnvTarget {
 public:
  explicit ReadOnceEnv(EnvTarget& real) : real_(real) {}
  std::optional<std::string> get(const std::string& name) override;
  bool set(const std::string&, const std::string&) override { return false; }

 private:
  EnvTarget& real_;
  std::map<std::string, std::optional<std::string>, std::less<>> seen_;
};

// Plans one task as task_init would, reading `env` (the job's environment) and writing
// nothing to it. nullopt: the plan needs the task itself. `in.user_env` is ignored.
std::optional<PreparedTask> prepare_task(StepInputs in, EnvTarget& env, bool master_addr_fixed);

// What a forked task sees, gathered without allocating: its ids from Slurm's items and its
// environment array (S_JOB_ENV: what spank_getenv reads and Slurm execs).
struct TaskView {
  TaskIds ids;                         // master_addr, nproc_per_node and port_salt unused
  const char* const* env = nullptr;    // NAME=VALUE entries, null-terminated
  std::string_view hostname;
};

// The one rule: whether the task may take `p` as its own plan. It may when every input
// plan_step and apply_env would read in the task gives what it gave in user_init: the same
// ids, the same values of the variables the plan read, and for the task variables that
// Slurm sets only in the task (SLURMD_NODENAME, CUDA_VISIBLE_DEVICES by GRES binding) the
// same outcome (the short host name, the GPU count).
bool task_may_use(const PreparedTask& p, const TaskView& t);

// The value of `name` in a NAME=VALUE array, the first entry as spank_getenv finds it.
std::optional<std::string_view> env_lookup(const char* const* env, std::string_view name);

}  // namespace gpudiag
