"""gpudiag.so loaded by a real srun/slurmstepd: the distributed env, user values,
nested steps, --diag validation and a broken config."""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PLUGIN, PYTHON, PluginClusterTest, plugstack_line  # noqa: E402
from slurm_cluster import slurm_version  # noqa: E402
from tagged import strip, tag_of  # noqa: E402

DUMP_ENV = ("import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k in "
            "('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', "
            "'PET_NNODES', 'PET_NODE_RANK', 'PET_NPROC_PER_NODE', 'PET_MASTER_ADDR', 'PET_MASTER_PORT', "
            "'NCCL_SOCKET_IFNAME', 'NCCL_DEBUG', 'NCCL_DEBUG_FILE', 'NCCL_DEBUG_SUBSYS', "
            "'TORCH_DISTRIBUTED_DEBUG', 'GPUDIAG_INJECTED', 'TORCHELASTIC_RUN_ID', 'SLURM_PROCID')}))")


# A SPANK plugin stacked after gpudiag: its user_init runs after gpudiag's has prepared
# each task's plan (spank/plan/prepared_task.h), and its task_init after gpudiag's.
NEIGHBOUR = r"""
#include <string.h>
#include <slurm/spank.h>
SPANK_PLUGIN(neighbour, 1);
static int asked(int ac, char **av, const char *what) {
  for (int i = 0; i < ac; ++i)
    if (!strcmp(av[i], what)) return 1;
  return 0;
}
int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  if (asked(ac, av, "world")) spank_setenv(sp, "WORLD_SIZE", "64", 1);
  return 0;
}
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  if (asked(ac, av, "rank")) spank_setenv(sp, "RANK", "neighbour", 1);
  return 0;
}
"""


def json_rows(text):
    # Steps with more than one task have [host:rank] on every line, and the relay cuts
    # a line longer than one slurmstepd message (marked '+'): join each task's pieces.
    tags = {tag_of(line) for line in text.splitlines()} - {None}
    if not tags:
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    data = text.encode(errors="surrogateescape")
    lines = [line for tag in tags for line in strip(data, tag.encode()).decode().splitlines()]
    return [json.loads(line) for line in lines if line.startswith("{")]


class PluginEnv(PluginClusterTest):
    def envs(self, *srun_args, env=None):
        r = self.cluster.run(["srun", *srun_args, PYTHON, "-c", DUMP_ENV], env=env, cwd=self.tmp, timeout=60)
        return sorted(json_rows(r.stdout), key=lambda e: int(e["SLURM_PROCID"]))

    def test_distributed_env_in_every_task(self):
        rows = self.envs("-n4")
        self.assertEqual(len(rows), 4)
        ports = {e["MASTER_PORT"] for e in rows}
        self.assertEqual(len(ports), 1)
        port = int(ports.pop())
        self.assertTrue(61000 <= port <= 65535, port)
        for i, e in enumerate(rows):
            self.assertEqual(e["RANK"], str(i))
            self.assertEqual(e["WORLD_SIZE"], "4")
            self.assertEqual(e["LOCAL_RANK"], str(i))
            self.assertEqual(e["LOCAL_WORLD_SIZE"], "4")
            self.assertEqual(e["MASTER_ADDR"], "127.0.0.1")  # the node's NodeAddr (issue 22)
            self.assertEqual(e["PET_NNODES"], "1")
            self.assertEqual(e["PET_NODE_RANK"], "0")
            self.assertEqual(e["PET_MASTER_PORT"], str(port))
            self.assertEqual(e["NCCL_SOCKET_IFNAME"], "^docker,lo,virbr")
            self.assertNotIn("TORCHELASTIC_RUN_ID", e)
            self.assertNotIn("NCCL_DEBUG", e)

    def test_different_steps_get_different_ports(self):
        a = self.envs("-n1")[0]["MASTER_PORT"]
        b = self.envs("-n1")[0]["MASTER_PORT"]
        self.assertNotEqual(a, b)

    def test_a_batch_jobs_salt_comes_from_sbatch_and_keeps_its_steps_apart(self):
        # sbatch gives the job its MASTER_PORT salt (spank/plan/port_salt.h); both steps use it,
        # and their ports still differ.
        script = os.path.join(self.tmp, "salted.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho batch salt=$SLURM_GPUDIAG_PORT_SALT\n"
                    "srun -n1 sh -c 'echo step $SLURM_STEP_ID $MASTER_PORT $SLURM_GPUDIAG_PORT_SALT'\n"
                    "srun -n1 sh -c 'echo step $SLURM_STEP_ID $MASTER_PORT $SLURM_GPUDIAG_PORT_SALT'\n")
        out = os.path.join(self.tmp, "salted.out")
        env = {k: v for k, v in self.cluster.env.items() if k != "SLURM_GPUDIAG_PORT_SALT"}
        self.cluster.run(["sbatch", "--wait", "-o", out, script], env=env, cwd=self.tmp, timeout=60)
        with open(out) as f:
            text = f.read()
        salt = re.search(r"batch salt=([0-9a-f]{16})\n", text)
        self.assertTrue(salt, text)
        steps = [line.split() for line in text.splitlines() if line.startswith("step ")]
        self.assertEqual(len(steps), 2, text)
        for _, _, port, step_salt in steps:
            self.assertEqual(step_salt, salt.group(1))
            self.assertTrue(61000 <= int(port) <= 65535, port)
        self.assertNotEqual(steps[0][2], steps[1][2])

    def test_user_values_survive(self):
        rows = self.envs("-n2", env={"MASTER_PORT": "12345", "NCCL_SOCKET_IFNAME": "=eth7"})
        for e in rows:
            self.assertEqual(e["MASTER_PORT"], "12345")
            self.assertEqual(e["NCCL_SOCKET_IFNAME"], "=eth7")
            self.assertIn("RANK", e)

    def test_a_step_without_srun_s_environment_still_gets_it_all(self):
        # --export=NONE passes none of srun's environment: the tasks still get it all.
        names = lambda e: sorted(x.split(":")[0] for x in e["GPUDIAG_INJECTED"].split(","))
        usual = self.envs("-n2")
        bare = self.envs("-n2", "--export=NONE")
        self.assertEqual(len(bare), 2)
        for a, b in zip(usual, bare):
            self.assertEqual(names(a), names(b))
            self.assertIn("MASTER_PORT", names(b))
            for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "NCCL_SOCKET_IFNAME", "PET_NNODES"):
                self.assertEqual(a[key], b[key], key)

    def test_a_value_given_in_srun_export_is_the_users(self):
        # srun merges its own environment over --export's values: a value gpudiag put in
        # srun's environment would replace the user's (adversary review 5).
        code = "import os; print(os.environ['MASTER_PORT'], os.environ['NCCL_SOCKET_IFNAME'])"
        r = self.cluster.run(["srun", "-n1", "--export=ALL,MASTER_PORT=29500,NCCL_SOCKET_IFNAME=ib0", PYTHON, "-c",
                              code], cwd=self.tmp, timeout=60)
        self.assertEqual(r.stdout.strip(), "29500 ib0", r.stderr)

    def test_nested_step_replaces_what_the_outer_step_injected(self):
        # The outer task's environment holds RANK=0 etc. from the plugin; the inner
        # srun's tasks must get their own values, not inherit those as "user" values.
        r = self.cluster.run(["srun", "-n1", "-c3", "srun", "--overlap", "-n3", "-c1", PYTHON, "-c", DUMP_ENV],
                             cwd=self.tmp, timeout=60)
        rows = sorted(json_rows(r.stdout), key=lambda e: int(e["SLURM_PROCID"]))
        self.assertEqual([e["RANK"] for e in rows], ["0", "1", "2"])
        self.assertTrue(all(e["WORLD_SIZE"] == "3" for e in rows))

    @contextlib.contextmanager
    def neighbour(self, arg):
        """NEIGHBOUR after gpudiag in the plugstack, asked for `arg`, for one block."""
        so = os.path.join(self.tmp, "neighbour.so")
        if not os.path.exists(so):
            src = os.path.join(self.tmp, "neighbour.c")
            with open(src, "w") as f:
                f.write(NEIGHBOUR)
            subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
        plugstack = os.path.join(self.tmp, "plugstack.conf")
        with open(plugstack) as f:
            before = f.read()
        try:
            with open(plugstack, "a") as f:
                f.write(f"required {so} {arg}\n")
            yield
        finally:
            with open(plugstack, "w") as f:
                f.write(before)

    def test_a_variable_another_plugin_sets_after_gpudiags_user_init_is_the_users(self):
        # gpudiag's user_init planned each task without WORLD_SIZE; the neighbour's user_init
        # then set it. No task may take its prepared plan (task_may_use): each plans itself,
        # and the neighbour's value is a user value.
        with self.neighbour("world"):
            rows = self.envs("-n3")
        self.assertEqual([e["RANK"] for e in rows], ["0", "1", "2"])
        self.assertEqual([e["LOCAL_RANK"] for e in rows], ["0", "1", "2"])
        for e in rows:
            self.assertEqual(e["WORLD_SIZE"], "64")
            injected = [item.split(":")[0] for item in e["GPUDIAG_INJECTED"].split(",")]
            self.assertNotIn("WORLD_SIZE", injected)
            self.assertIn("MASTER_PORT", injected)

    def test_a_plugin_after_gpudiag_may_set_what_gpudiag_set(self):
        # The neighbour's task_init runs after gpudiag's: its RANK replaces gpudiag's.
        with self.neighbour("rank"):
            rows = self.envs("-n3")
        self.assertEqual([e["RANK"] for e in rows], ["neighbour"] * 3)
        self.assertEqual([e["LOCAL_RANK"] for e in rows], ["0", "1", "2"])

    def test_nested_step_keeps_values_the_user_exported_inside_the_outer_step(self):
        # salloc + `srun --pty bash`: the user exports inside the step, then runs srun.
        # Only a value still equal to what the plugin injected may be replaced (21.7).
        script = ("export NCCL_SOCKET_IFNAME=eth0 MASTER_PORT=12345; "
                  f"exec srun --overlap -n2 -c1 {PYTHON} -c \"$0\"")
        r = self.cluster.run(["srun", "-n1", "-c2", "sh", "-c", script, DUMP_ENV], cwd=self.tmp, timeout=60)
        rows = sorted(json_rows(r.stdout), key=lambda e: int(e["SLURM_PROCID"]))
        self.assertEqual([e["RANK"] for e in rows], ["0", "1"], r.stdout + r.stderr)
        for e in rows:
            self.assertEqual(e["NCCL_SOCKET_IFNAME"], "eth0")
            self.assertEqual(e["MASTER_PORT"], "12345")
            self.assertEqual(e["WORLD_SIZE"], "2")  # still the plugin's to replace

    def test_sbatch_steps_get_their_own_ranks(self):
        script = os.path.join(self.tmp, "job.sh")
        out = os.path.join(self.tmp, "job.out")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\necho batch RANK=${{RANK:-unset}}\nsrun -n4 {PYTHON} -c \"{DUMP_ENV}\"\n")
        self.cluster.run(["sbatch", "-n4", "--wait", "-o", out, script], cwd=self.tmp, timeout=120)
        with open(out) as f:
            text = f.read()
        self.assertIn("batch RANK=unset", text)
        rows = sorted(json_rows(text), key=lambda e: int(e["RANK"]))
        self.assertEqual([e["RANK"] for e in rows], ["0", "1", "2", "3"])

    def test_diag_sets_nccl_logging_and_creates_the_dir(self):
        rows = self.envs("-n2", "--diag")
        e = rows[0]
        self.assertEqual(e["NCCL_DEBUG"], "INFO")
        self.assertEqual(e["NCCL_DEBUG_SUBSYS"], "INIT,NET,ENV")
        self.assertEqual(e["TORCH_DISTRIBUTED_DEBUG"], "INFO")
        self.assertTrue(e["NCCL_DEBUG_FILE"].endswith("/nccl.%h.%p.log"), e["NCCL_DEBUG_FILE"])
        self.assertTrue(os.path.isdir(os.path.dirname(e["NCCL_DEBUG_FILE"])))
        rows = self.envs("-n1", "--diag=nccl=trace,subsys=INIT+COLL")
        self.assertEqual(rows[0]["NCCL_DEBUG"], "TRACE")
        self.assertEqual(rows[0]["NCCL_DEBUG_SUBSYS"], "INIT,COLL")

    def test_bad_diag_item_fails_before_launch(self):
        marker = os.path.join(self.tmp, "launched")
        r = self.cluster.run(["srun", "-n1", "--diag=foo", "touch", marker], check=False, cwd=self.tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("gpudiag: --diag: unknown item 'foo' (known:", r.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_broken_config_fails_srun_clearly_and_daemons_live_on(self):
        with open(self.config) as f:
            good = f.read()
        try:
            with open(self.config, "w") as f:
                f.write(good + "\nplugin_typo: 1\n")
            r = self.cluster.run(["srun", "-n1", "true"], check=False, cwd=self.tmp, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("unknown key 'plugin_typo'", r.stderr)
        finally:
            with open(self.config, "w") as f:
                f.write(good)
        self.assertTrue(all(p.poll() is None for _, p in self.cluster.procs), "a daemon died")
        self.assertEqual(len(self.envs("-n1")), 1)

    def test_config_broken_only_on_the_node_fails_the_job_and_keeps_the_node(self):
        # slurmstepd reads the plugstack and gpudiag.yaml on its own: an admin's typo that
        # only the node sees (srun here reads a good copy, through a slurm.conf of its own)
        # fails the job with the config's error, and never drains the node, on every
        # release (25.05+ would drain it for a failing init: ESPANK_NODE_FAILURE).
        good_yaml = os.path.join(self.tmp, "srun-side.yaml")
        with open(self.config) as f:
            good = f.read()
        with open(good_yaml, "w") as f:
            f.write(good)
        good_stack = os.path.join(self.tmp, "srun-side-plugstack.conf")
        with open(good_stack, "w") as f:
            f.write(plugstack_line(PLUGIN, good_yaml, self.tmp))
        srun_conf = os.path.join(self.tmp, "srun-side-slurm.conf")
        with open(self.cluster.conf) as f:
            conf = re.sub(r"(?m)^PlugStackConfig=.*$", f"PlugStackConfig={good_stack}", f.read())
        with open(srun_conf, "w") as f:
            f.write(conf)
        marker = os.path.join(self.tmp, "ran-on-broken-node")
        try:
            with open(self.config, "w") as f:
                f.write(good + "\nplugin_typo: 1\n")
            r = self.cluster.run(["srun", "-n1", "touch", marker], check=False, cwd=self.tmp, timeout=60,
                                 env={"SLURM_CONF": srun_conf})
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("unknown key 'plugin_typo'", r.stderr)
            self.assertFalse(os.path.exists(marker), "the program ran where gpudiag could not")
            state = self.cluster.node_state()
            self.assertFalse(state.startswith(("DRAIN", "DOWN", "FAIL")), f"{state}: {self.cluster.node_reason()}")
        finally:
            with open(self.config, "w") as f:
                f.write(good)
        self.assertEqual(len(self.envs("-n1")), 1)

    def test_init_failure_mode_is_the_jobs_where_slurm_asks(self):
        # Slurm 25.05+ reads slurm_spank_init_failure_mode from each plugin; gpudiag's is
        # ESPANK_JOB_FAILURE (spank/slurm/slurm_compat.h). Older releases do not declare it.
        major, minor = slurm_version()
        nm = subprocess.run(["nm", "-D", "--defined-only", PLUGIN], capture_output=True, text=True, check=True).stdout
        exported = re.search(r"(?m) [DdBb] slurm_spank_init_failure_mode$", nm) is not None
        self.assertEqual(exported, (major, minor) >= (25, 5), nm)

    def test_missing_config_names_plugstack_as_the_fix(self):
        moved = self.config + ".away"
        os.rename(self.config, moved)
        try:
            r = self.cluster.run(["srun", "-n1", "true"], check=False, cwd=self.tmp, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(self.config, r.stderr)
            self.assertIn("plugstack.conf", r.stderr)
        finally:
            os.rename(moved, self.config)

    def test_a_settled_config_is_read_from_roots_cache_without_yaml(self):
        # Issue 34: once root has kept the document of an unchanged config, srun and
        # slurmstepd read it from the cache and never load yaml-cpp: a gpudiag.so without
        # its YAML reader beside it still runs steps, until the config changes.
        cache = os.path.join(self.tmp, "cache-test")
        alone = os.path.join(self.tmp, "alone")
        os.makedirs(alone, exist_ok=True)
        shutil.copy(PLUGIN, os.path.join(alone, "gpudiag.so"))
        config = os.path.join(self.tmp, "cached.yaml")
        with open(self.config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(text + "\nplugin:\n  prefix: always\n" if "\nplugin:" not in text else text)
        time.sleep(2.2)  # a file changed within the last 2 s is not cached (config_cache.h)
        plugstack = os.path.join(self.tmp, "plugstack.conf")
        with open(plugstack) as f:
            saved = f.read()
        try:
            with open(plugstack, "w") as f:
                f.write(plugstack_line(PLUGIN, config, self.tmp).replace(os.path.join(self.tmp, "config-cache"), cache))
            self.cluster.run(["srun", "-n1", "true"], cwd=self.tmp, timeout=60)
            names = os.listdir(cache)
            self.assertEqual(len(names), 1, names)
            st = os.stat(os.path.join(cache, names[0]))
            self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o644))

            with open(plugstack, "w") as f:
                f.write(plugstack_line(os.path.join(alone, "gpudiag.so"), config, self.tmp).replace(
                    os.path.join(self.tmp, "config-cache"), cache))
            r = self.cluster.run(["srun", "-n2", PYTHON, "-c", DUMP_ENV], cwd=self.tmp, timeout=60)
            rows = sorted(json_rows(r.stdout), key=lambda e: int(e["SLURM_PROCID"]))
            self.assertEqual([e["RANK"] for e in rows], ["0", "1"], r.stdout + r.stderr)

            with open(config, "a") as f:
                f.write("# changed\n")
            r = self.cluster.run(["srun", "-n1", "true"], check=False, cwd=self.tmp, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("cannot load its YAML reader", r.stderr)
            self.assertIn("reinstall gpudiag", r.stderr)
        finally:
            with open(plugstack, "w") as f:
                f.write(saved)


if __name__ == "__main__":
    unittest.main(verbosity=2)
