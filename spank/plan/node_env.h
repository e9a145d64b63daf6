#pragma once
// The variables user_init adds to the job's environment once for all the node's tasks
// (issue 34). In a forked task each spank_setenv costs Slurm a 256 KiB calloc that glibc
// clears (setenvf's value buffer): 24 of them were a fifth of gpudiag's cost per task.
// Slurm can overwrite a variable the array already holds without that buffer
// (env_array_overwrite), but only spank_setenv can add one. So user_init adds, before the
// fork, each variable the first prepared task sets that the job's environment lacks, with
// that task's value; every task then changes in place only what differs from it (RANK,
// LOCAL_RANK, GPUDIAG_INJECTED) and unsets what it does not set at all. A task that
// cannot take its prepared plan first unsets what user_init added and still holds the
// value it added, and plans itself from the environment as it was.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spank/plan/env_writer.h"
#include "spank/plan/prepared_task.h"

namespace gpudiag {

// What user_init added, in order. Only names the job's environment lacked: a present one
// is the user's or an outer step's, and a task changes it in place.
struct NodeEnv {
  EnvList added;
};

// One change to a task's environment: set `value`, or unset where nullopt.
struct EnvEdit {
  std::string name;
  std::optional<std::string> value;
};

// The first prepared task's variables that `job_env` (the job's environment in user_init,
// before any is added) lacks.
NodeEnv node_env_of(const PreparedTask& first, EnvTarget& job_env);

// Whether every added variable still holds the value user_init gave it: only then does
// the task's environment less the added names equal the one its plan was made from.
bool node_env_intact(const NodeEnv& node, const char* const* env);

// The changes that take a task's environment from "as it was, plus `node.added`" to "as it
// was, plus `task_sets`" (the task's prepared sets, in their order).
std::vector<EnvEdit> task_env_edits(const NodeEnv& node, const EnvList& task_sets);

// The changes that take away what user_init added, where `env` still holds its value: a
// task that plans itself reads the environment as it would have been.
std::vector<EnvEdit> node_env_removal(const NodeEnv& node, const char* const* env);

// Whether `name` is one user_init added (a task reads it as unset until it checks).
bool added_by_node(const NodeEnv& node, std::string_view name);

}  // namespace gpudiag
