/* The floor under gpudiag's environment: a SPANK plugin that sets, in each task, the
 * variables given as its arguments (NAME=VALUE ...) and does nothing else. The benches give
 * it the variables gpudiag.so gave a task of the same step shape (multinode_bench.env_floor),
 * so its row is what any plugin pays Slurm to give a task that environment: each
 * spank_setenv is a setenvf in the forked task, with its own cleared 256 KiB buffer. */
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(envfloor, 1);

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  for (int i = 0; i < ac; i++) {
    const char *eq = strchr(av[i], '=');
    char name[256];
    if (!eq || eq == av[i] || (size_t)(eq - av[i]) >= sizeof name) continue;
    memcpy(name, av[i], (size_t)(eq - av[i]));
    name[eq - av[i]] = '\0';
    if (spank_setenv(sp, name, eq + 1, 1) != ESPANK_SUCCESS)
      slurm_error("envfloor: could not set %s", name);
  }
  return 0;
}
