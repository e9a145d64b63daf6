// sbatch and salloc (S_CTX_ALLOCATOR), as the user, once per job: the job's environment is
// still being made, and what is set now its steps inherit.
#include <cstdlib>
#include <string>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "spank/slurm/contexts.h"

#include "spank/plan/diag_options.h"
#include "spank/plan/port_salt.h"
#include "spank/slurm/spank_access.h"

namespace gpudiag::in_allocator {

int init(spank_t sp, int ac, char** av) {
  auto cfg = load_plugin_config(ac, av);
  if (!cfg) {
    slurm_error("%s", cfg.error().c_str());
    return -1;
  }
  return register_options(sp, true) ? 0 : -1;
}

// --diag given to sbatch or salloc: parsed only to fail early (srun and slurmstepd read it
// again from the job's environment and their own options).
int diag_option(const char* optarg) {
  auto parsed = parse_diag_list(optarg ? optarg : "");
  if (!parsed) {
    slurm_error("%s", parsed.error().c_str());
    return -1;
  }
  return 0;
}

int init_post_opt(spank_t) {
  give_job_a_port_salt();
  return 0;
}

// One the job already has (an srun inside sbatch) is kept, so that the job's steps keep
// distinct ports.
void give_job_a_port_salt() {
  const char* have = std::getenv(kPortSaltEnv);
  if (have && parse_port_salt(std::string(have))) return;
  if (auto salt = new_port_salt()) ::setenv(kPortSaltEnv, salt->c_str(), 1);
}

}  // namespace gpudiag::in_allocator
