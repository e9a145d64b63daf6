"""The rendezvous address on a node whose NodeName resolves nowhere (issue 22): Slurm
reaches it by NodeAddr=127.0.0.1, so gpudiag.so must hand torch that address, and a step
whose MASTER_ADDR cannot resolve must fail in seconds, naming it, instead of retrying for
torch's 30-minute rendezvous timeout. Real Slurm, real torch (gloo)."""
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from tagged import untag  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ALLREDUCE = os.path.join(HERE, "torch_allreduce.py")
TORCHRUN = os.path.join(HERE, "torchrun_shim.py")
NODE = "gpudiag-nowhere"
NOWHERE = "gpudiag-master.invalid"  # RFC 6761: resolves nowhere, ever
CLEAN = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
         "PET_RDZV_ENDPOINT", "GPUDIAG_INJECTED")
# A step that fails fast ends in seconds; one that hangs in torch's rendezvous would
# retry for 30 minutes. This bounds the wait, it does not time anything.
FAST = 90


class Rendezvous(PluginClusterTest):
    cluster_options = {"node_name": NODE}

    @classmethod
    def setUpClass(cls):
        try:
            socket.getaddrinfo(NODE, None)
            raise unittest.SkipTest(f"{NODE} resolves on this machine: the test needs a name that does not")
        except socket.gaierror:
            pass
        super().setUpClass()
        with open(cls.config) as f:
            cls.good_config = f.read()

    def tearDown(self):
        self.set_plugin_config("")

    def set_plugin_config(self, extra):
        with open(self.config, "w") as f:
            f.write(self.good_config.replace("\nplugin:\n", "\nplugin:\n" + extra, 1))

    def srun_clean(self, *args, env=None, timeout=FAST):
        unset = [name for name in CLEAN if name not in (env or {})]
        return self.cluster.run(["srun", *args], cwd=self.tmp, timeout=timeout, check=False, env=env, unset=unset)

    def assert_failed_naming(self, r, message):
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(message, r.stderr)
        self.assertNotIn("allreduce rank=", r.stdout)  # the program never started

    def test_gloo_allreduce_with_no_user_env(self):
        r = self.srun_clean("-n2", PYTHON, ALLREDUCE, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        rows = [untag(line) for line in r.stdout.splitlines() if "allreduce" in line]
        self.assertEqual(len(rows), 2, r.stdout)
        for row in rows:
            self.assertIn("sum=3", row)
            self.assertIn("master=127.0.0.1:", row)  # NodeAddr, as Slurm reaches the node

    def test_master_addr_modes(self):
        def master(*srun_args):
            r = self.srun_clean("-n1", *srun_args, "printenv", "MASTER_ADDR", "PET_MASTER_ADDR")
            return r.returncode, r.stdout.split(), r.stderr

        self.assertEqual(master()[:2], (0, ["127.0.0.1", "127.0.0.1"]))
        self.set_plugin_config("  master_addr: hostname\n")
        self.assertEqual(master()[:2], (0, [socket.gethostname().split(".")[0]] * 2))
        # The NodeName, as before: it does not resolve, which the step is told about...
        self.set_plugin_config("  master_addr: name\n")
        rc, out, err = master()
        self.assertEqual((rc, out), (0, [NODE, NODE]), err)
        self.assertIn(f"gpudiag: MASTER_ADDR {NODE} does not resolve on {NODE}: ", err)
        self.assertIn("set plugin.master_addr: address", err)
        # ...and with the preflight it is an error: the program does not start.
        rc, out, err = master("--diag=preflight")
        self.assertNotEqual(rc, 0)
        self.assertEqual(out, [])
        self.assertIn(f"gpudiag: MASTER_ADDR {NODE} does not resolve on {NODE}: ", err)

    def test_user_master_addr_that_does_not_resolve_fails_fast(self):
        r = self.srun_clean("-n2", PYTHON, ALLREDUCE, env={"MASTER_ADDR": NOWHERE})
        self.assert_failed_naming(r, f"gpudiag: MASTER_ADDR {NOWHERE} does not resolve on {NODE}: ")
        self.assertIn(f"set MASTER_ADDR to a name or address that resolves on every node", r.stderr)

    def test_sbatch_then_srun_fails_fast(self):
        script = os.path.join(self.tmp, "rdzv.sh")
        out = os.path.join(self.tmp, "rdzv.out")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nexport MASTER_ADDR={NOWHERE}\nsrun -n2 {PYTHON} {ALLREDUCE}\necho srun exit $?\n")
        self.cluster.run(["sbatch", "-n2", "--wait", "-o", out, script], cwd=self.tmp, timeout=FAST, check=False,
                         unset=CLEAN)
        with open(out) as f:
            text = f.read()
        self.assertIn(f"gpudiag: MASTER_ADDR {NOWHERE} does not resolve on {NODE}: ", text)
        self.assertIn("srun exit 1", text)
        self.assertNotIn("allreduce rank=", text)

    def test_torchrun_pet_values_that_do_not_resolve_fail_fast(self):
        r = self.srun_clean("-n1", PYTHON, TORCHRUN, ALLREDUCE, env={"PET_MASTER_ADDR": NOWHERE})
        self.assert_failed_naming(r, f"gpudiag: PET_MASTER_ADDR {NOWHERE} does not resolve on {NODE}: ")
        r = self.srun_clean("-n1", PYTHON, TORCHRUN, ALLREDUCE,
                            env={"PET_RDZV_ENDPOINT": f"{NOWHERE}:29400", "PET_RDZV_BACKEND": "c10d"})
        self.assert_failed_naming(r, f"gpudiag: PET_RDZV_ENDPOINT {NOWHERE} does not resolve on {NODE}: ")


if __name__ == "__main__":
    unittest.main(verbosity=2)
