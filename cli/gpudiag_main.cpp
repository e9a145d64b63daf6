// gpudiag: the user's command. `gpudiag nccl-log FILE|DIR...` explains NCCL debug logs
// (nccllog/). `gpudiag stacks JOB[.STEP]` collects, from every node of
// a running job, what the hang watchdog writes: each process's tree, state, wchan and
// stacks. It runs one task per node inside the job (srun --overlap --jobid), so no
// ssh and no privileges are needed; there each task runs `gpudiag stacks --local`,
// which takes the job's processes from Slurm (scontrol listpids). srun runs as a child
// that holds none of our terminal or files (util/spawn_child.h); this process copies its
// output, control bytes escaped (util/attached_child.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/nccl_log_command.h"
#include "nodeinfo/proc_tree.h"
#include "util/this_host.h"
#include "stacks/stack_report.h"
#include "stacks/job_nodes.h"
#include "stacks/job_owner.h"
#include "stacks/step_processes.h"
#include "util/attached_child.h"

extern char** environ;

namespace {

std::string self_path(const char* argv0) {
  std::string self = gpudiag::self_exe_path();
  return self.empty() ? argv0 : self;
}

constexpr double kSlurmTimeout = 10;

int local_report(const gpudiag::StepId& id, double timeout) {
  const char* own = std::getenv("SLURM_STEP_ID");
  const char* own_job = std::getenv("SLURM_JOB_ID");
  std::string skip = own && own_job && id.job == own_job ? own : "";
  std::string what = id.job + (id.step ? "." + *id.step : std::string(" (all steps)"));
  auto listed = gpudiag::list_job_pids(id.job, kSlurmTimeout);
  if (!listed) {
    std::cerr << "gpudiag: stacks on " << gpudiag::short_hostname() << ": cannot get the processes of job " << what
              << " from Slurm: " << listed.error() << "\n";
    return 3;
  }
  auto tasks = gpudiag::step_task_roots(*listed, gpudiag::snapshot_processes(), id, skip);
  std::vector<gpudiag::TaskRoot> roots;
  for (const auto& t : tasks) roots.push_back({t.rank, t.pid});
  if (roots.empty()) {
    std::cout << "gpudiag stacks: " << gpudiag::short_hostname() << ": no processes of job " << what << " on this node\n";
    return 0;
  }
  std::cout << gpudiag::stack_report("gpudiag stacks: job " + what + " on " + gpudiag::short_hostname() + ", " +
                                         std::to_string(roots.size()) + " task(s)",
                                     roots, gpudiag::find_stack_tools(), timeout);
  return 0;
}

// Variables from a job's environment (SLURM_NTASKS, SLURM_MEM_PER_CPU, SLURM_GPUS_PER_TASK,
// ...) are srun options in disguise: inside an allocation they would make the stacks step
// ask for the job's tasks, memory and GPUs, and be refused or wait behind the job.
std::vector<std::string> environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

void drop_slurm_inputs() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool slurm = name.rfind("SLURM_", 0) == 0 || name.rfind("SRUN_", 0) == 0 || name.rfind("SALLOC_", 0) == 0 ||
                 name.rfind("SBATCH_", 0) == 0;
    if (slurm && name != "SLURM_CONF" && name != "SLURM_CLUSTERS") names.push_back(name);
  }
  for (const auto& n : names) ::unsetenv(n.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpudiag: diagnostics for GPU jobs on Slurm"};
  app.require_subcommand(1);
  auto* stacks = app.add_subcommand("stacks", "stacks of every process of a running job, from all its nodes");
  std::string job;
  bool local = false;
  double timeout = 15;
  stacks->add_option("job", job, "JOBID or JOBID.STEPID")->required();
  stacks->add_flag("--local", local, "only this node (what each node runs)");
  stacks->add_option("--tool-timeout", timeout, "seconds for each py-spy/eu-stack/gdb call")->check(CLI::Range(1.0, 600.0));
  gpudiag::NcclLogCommand nccl_log;
  auto* nccl_log_cmd = gpudiag::add_nccl_log_command(app, nccl_log);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 3;
  }
  if (nccl_log_cmd->parsed()) {
    try {
      return gpudiag::run_nccl_log_command(nccl_log);
    } catch (const std::exception& e) {
      std::cerr << "gpudiag nccl-log: internal error: " << e.what() << "\n";
      return 3;
    }
  }
  auto id = gpudiag::parse_step_id(job);
  if (!id) {
    std::cerr << id.error() << "\n";
    return 3;
  }
  if (local) return local_report(*id, timeout);
  std::string self = self_path(argv[0]);
  // Root runs srun as the job's owner, and that srun gets nothing of root's (issue 30).
  std::optional<gpudiag::ChildUser> owner_side;
  if (::geteuid() == 0) {
    auto owner = gpudiag::job_owner(id->job, kSlurmTimeout);
    if (!owner) {
      std::cerr << owner.error() << "\n";
      return 3;
    }
    if (*owner != 0) {
      auto creds = gpudiag::owner_credentials(*owner, environment());
      if (!creds) {
        std::cerr << creds.error() << ": run gpudiag stacks as the job's owner instead\n";
        return 3;
      }
      owner_side = *creds;
    }
  }
  drop_slurm_inputs();
  auto nodes = gpudiag::job_node_count(id->job, kSlurmTimeout);
  if (!nodes) {
    std::cerr << nodes.error() << "\n";
    return 3;
  }
  // One task per node of the job, overlapping the job's steps and asking for none of
  // its GPUs or memory: a training job holds all of both. No shell anywhere.
  std::vector<std::string> args = {"srun", "--overlap", "--jobid=" + id->job, "--nodes=" + std::to_string(*nodes),
                                   "--ntasks-per-node=1",
                                   "--gres=none", "--mem=0", "--chdir=/", "--quiet", self, "stacks", "--local",
                                   "--tool-timeout=" + std::to_string(static_cast<int>(timeout)), job};
  std::cout.flush();
  auto ran = gpudiag::run_attached(args, owner_side ? &*owner_side : nullptr, STDOUT_FILENO, STDERR_FILENO);
  if (!ran.started) {
    // spawn_child names the step that failed: the exec (srun not found) or the switch.
    const bool exec = ran.error.rfind("exec:", 0) == 0 || ran.error.rfind("srun:", 0) == 0;
    std::cerr << "gpudiag: cannot run srun"
              << (owner_side ? " as the job's owner (uid " + std::to_string(owner_side->uid) + ")" : std::string())
              << ": " << ran.error
              << (exec ? ": is Slurm's client installed and on PATH?\n" : ": run gpudiag stacks as the job's owner instead\n");
    return 3;
  }
  if (ran.signal) {
    std::cerr << "gpudiag: srun was ended by signal " << ran.signal << " (" << strsignal(ran.signal) << ")\n";
    return 128 + ran.signal;
  }
  return ran.exit_code;
}
