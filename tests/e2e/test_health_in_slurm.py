"""gpudiag-health's --drain/--resume and the epilog hook, against a real local Slurm."""
import os
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import SlurmCluster  # noqa: E402

BUILD = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEALTH = os.path.abspath(os.path.join(BUILD, "healthcheck", "gpudiag-health"))
FIXTURES = os.path.abspath(os.path.join(BUILD, "fixtures"))
SITE_CONFIG = os.path.join(SOURCE, "etc", "gpudiag.yaml")


class HealthInSlurm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpudiag-e2e-")
        # The epilog runs with Slurm's minimal environment, so a wrapper supplies what
        # the test needs: our binary, our cluster's slurm.conf, and the fixture to check
        # (read from a file, so a test can switch it without restarting the cluster).
        cls.epilog_fixture = os.path.join(cls.tmp.name, "epilog-fixture")
        with open(cls.epilog_fixture, "w") as f:
            f.write("healthy")
        cls.epilog = os.path.join(cls.tmp.name, "epilog")
        cls.cluster = SlurmCluster(extra_conf=[f"Epilog={cls.epilog}"])
        cls.cluster.__enter__()
        with open(cls.epilog, "w") as f:
            f.write("#!/bin/sh\n"
                    f"export SLURM_CONF={cls.cluster.conf}\n"
                    f"export GPUDIAG_HEALTH={HEALTH}\n"
                    f"export GPUDIAG_HEALTH_ARGS=\"--config {SITE_CONFIG} --fs-root {FIXTURES}/$(cat {cls.epilog_fixture})\"\n"
                    f"exec {SOURCE}/etc/slurm/gpudiag-epilog\n")
        os.chmod(cls.epilog, 0o755)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.tmp.cleanup()

    def setUp(self):
        c = self.cluster
        with open(self.epilog_fixture, "w") as f:
            f.write("healthy")
        if "DRAIN" in c.node_state():
            c.resume()
        c.wait_for(lambda: c.node_state() == "IDLE", "node idle before the test")

    def health(self, fixture, *args, env=None, timeout=60):
        argv = [HEALTH, "--fs-root", os.path.join(FIXTURES, fixture), "--config", SITE_CONFIG,
                "--node", self.cluster.node, *args]
        return self.cluster.run(argv, check=False, env=env, timeout=timeout)

    def test_drain_on_down_port(self):
        r = self.health("port-down", "--drain")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        node = self.cluster.show_node()
        self.assertIn("DRAIN", node)
        reason = self.cluster.node_reason()
        self.assertTrue(reason.startswith("gpudiag: "), reason)
        self.assertIn("mlx5_3 port 1 is DOWN", reason)
        self.assertIn("drained: gpudiag:", r.stdout)

    def test_resume_when_healthy_again(self):
        self.assertEqual(self.health("port-down", "--drain").returncode, 2)
        self.assertIn("DRAIN", self.cluster.node_state())
        r = self.health("healthy", "--resume")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("resumed", r.stdout)
        self.cluster.wait_for(lambda: self.cluster.node_state() == "IDLE", "node back to IDLE")

    def test_admin_drain_is_never_touched(self):
        self.cluster.drain("maintenance")
        r = self.health("healthy", "--resume")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("not by gpudiag", r.stdout)
        self.assertIn("DRAIN", self.cluster.node_state())
        self.assertEqual(self.cluster.node_reason(), "maintenance")
        r = self.health("port-down", "--drain")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(self.cluster.node_reason(), "maintenance")

    def test_verbose_on_drained_node_explains(self):
        self.health("port-down", "--drain")
        r = self.health("port-down", "--verbose")
        self.assertIn("is drained by gpudiag", r.stdout)
        self.assertIn("gpudiag-health --resume", r.stdout)
        self.assertIn("fix: no link partner", r.stdout)

    def _fake_scontrol(self, body):
        d = tempfile.mkdtemp(dir=self.tmp.name)
        path = os.path.join(d, "scontrol")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)
        config = os.path.join(d, "gpudiag.yaml")
        with open(config, "w") as f:
            f.write("health:\n  scontrol_timeout: 2\n")
        return {"PATH": d + ":" + os.environ["PATH"]}, config

    def test_hung_scontrol_is_reported_not_waited_on(self):
        env, config = self._fake_scontrol("exec sleep 600\n")
        t0 = time.monotonic()
        r = self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, "port-down"), "--config", config,
                              "--drain"], check=False, env=env, timeout=30)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("scontrol timed out after 2 s", r.stderr)
        self.assertLess(elapsed, 10)
        # The sleeping stand-in was killed with its process group, not left behind.
        left = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True).stdout
        self.assertEqual(left.strip(), "")

    def test_failing_scontrol_is_quoted(self):
        env, config = self._fake_scontrol(
            "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
        r = self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, "port-down"), "--config", config,
                              "--drain"], check=False, env=env, timeout=30)
        self.assertEqual(r.returncode, 3)
        self.assertIn("scontrol exited 1: slurm_load_node error: Unable to contact slurm controller", r.stderr)

    def test_epilog_drains_after_a_real_job(self):
        with open(self.epilog_fixture, "w") as f:
            f.write("port-down")
        self.cluster.run(["srun", "-n1", "true"], timeout=60)
        self.cluster.wait_for(lambda: "DRAIN" in self.cluster.node_state(), "the epilog to drain the node")
        reason = self.cluster.node_reason()
        self.assertTrue(reason.startswith("gpudiag: mlx5_3 port 1 is DOWN"), reason)

    def test_epilog_leaves_healthy_node_alone(self):
        self.cluster.run(["srun", "-n1", "true"], timeout=60)
        time.sleep(1)
        self.assertEqual(self.cluster.node_state(), "IDLE")


if __name__ == "__main__":
    unittest.main(verbosity=2)
