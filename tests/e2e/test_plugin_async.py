"""`srun --async` (Slurm 26.05): srun returns once the step is accepted and runs its local
exit at once, so gpudiag's srun side sees no step end. What it must do there: the tasks
still get gpudiag's environment and the diag dir; srun's end-of-step summary is not
printed (srun never runs local_user_init, so it knows no step); and under the preflight,
whose cross-node barrier srun holds, each node runs its own preflight and rank 0 says that
no barrier holds the others. Skipped before 26.05 (no --async)."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from slurm_cluster import slurm_version  # noqa: E402

HAS_ASYNC = slurm_version() >= (26, 5)


@unittest.skipUnless(HAS_ASYNC, "srun --async is new in Slurm 26.05")
class AsyncStep(PluginClusterTest):
    # --async needs the job's step manager, which needs the extern step (PrologFlags=contain).
    extra_conf = ("SlurmctldParameters=enable_stepmgr", "PrologFlags=contain")

    def batch(self, body, name):
        script = os.path.join(self.tmp, f"{name}.sh")
        out = os.path.join(self.tmp, f"{name}.out")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n" + body)
        r = self.cluster.run(["sbatch", "--stepmgr", "-n2", "--wait", "-o", out, script], cwd=self.tmp, timeout=120,
                             check=False)
        with open(out) as f:
            return r, f.read()

    def wait_for_file(self, path, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path) and os.path.getsize(path) > 0:
                return True
            time.sleep(0.5)
        return False

    def test_async_step_gets_the_environment_and_no_summary_from_srun(self):
        task_out = os.path.join(self.tmp, "async-env.%t")
        body = (f"srun --async -n2 --diag -o {task_out} {PYTHON} -c "
                "'import os; print(os.environ.get(\"RANK\"), os.environ.get(\"GPUDIAG_DIAG_DIR\", \"-\"))'\n"
                "echo srun-returned=$?\n"
                f"for i in $(seq 60); do [ -s {self.tmp}/async-env.1 ] && break; sleep 0.5; done\n")
        r, out = self.batch(body, "async-env")
        self.assertEqual(r.returncode, 0, out + r.stderr)
        self.assertIn("srun-returned=0", out)
        self.assertNotIn("gpudiag: NCCL", out)  # no end-of-step summary from an srun that saw no step
        self.assertTrue(self.wait_for_file(os.path.join(self.tmp, "async-env.1")))
        ranks = []
        for t in (0, 1):
            with open(os.path.join(self.tmp, f"async-env.{t}")) as f:
                ranks.append(f.read().split()[0])
        ranks.sort()
        self.assertEqual(ranks, ["0", "1"])

    def test_async_step_under_the_preflight_runs_it_per_node_and_says_there_is_no_barrier(self):
        # No srun holds the barrier: each node's preflight still runs, and rank 0 says once
        # that nothing waits for the other nodes.
        err = os.path.join(self.tmp, "async-preflight.err.%t")
        marker = os.path.join(self.tmp, "async-preflight-ran.")
        body = (f"srun --async -n2 --diag=preflight -e {err} -o /dev/null sh -c 'touch {marker}$SLURM_PROCID'\n"
                f"for i in $(seq 60); do [ -e {marker}1 ] && [ -e {marker}0 ] && break; sleep 0.5; done; sleep 1\n")
        r, out = self.batch(body, "async-preflight")
        self.assertEqual(r.returncode, 0, out + r.stderr)
        self.assertTrue(os.path.exists(marker + "0") and os.path.exists(marker + "1"), out)
        with open(err.replace("%t", "0")) as f:
            text = f.read()
        self.assertIn("gpudiag: preflight: this step has no srun to hold the cross-node barrier (srun --async)", text)
        with open(err.replace("%t", "1")) as f:
            self.assertNotIn("cross-node barrier", f.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
