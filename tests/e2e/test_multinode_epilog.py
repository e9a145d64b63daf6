"""The epilog across nodes (issue 17.8), on a real 4-node Slurm in namespaces: after one
job on every node, only the sick node is drained, with gpudiag's prefix; a node an admin
drained, and one an admin set DOWN, while the job ran stay as the admin left them,
though they are just as sick. Each node sees its own fixture name through its mount
namespace (a file bound over the one the epilog reads)."""
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_cluster import MultiNodeCluster, namespaces_usable  # noqa: E402
from test_health_in_slurm import FIXTURES, HEALTH, SITE_CONFIG, SOURCE, SyslogSocket  # noqa: E402


class EpilogAcrossNodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = namespaces_usable()
        if why:
            raise unittest.SkipTest(why)
        cls.tmp = tempfile.mkdtemp(prefix="gpudiag-multinode-epilog-")
        os.chmod(cls.tmp, 0o755)
        # The epilog reads its fixture's name from one path; each sick node has a file
        # saying port-down bound over it, in its own mount namespace.
        cls.fixture_name = os.path.join(cls.tmp, "fixture")
        with open(cls.fixture_name, "w") as f:
            f.write("healthy")
        sick = os.path.join(cls.tmp, "fixture.sick")
        with open(sick, "w") as f:
            f.write("port-down")
        cls.syslog = SyslogSocket(os.path.join(cls.tmp, "log.sock"))
        cls.epilog = os.path.join(cls.tmp, "epilog")
        binds = {n: [(sick, cls.fixture_name)] for n in ("n2", "n3", "n4")}
        # ReturnToService=1, as most sites run: with 2, Slurm itself returns a node an
        # admin set DOWN to service as soon as its slurmd registers again.
        cls.cluster = MultiNodeCluster(nodes=4, extra_conf=[f"Epilog={cls.epilog}"], binds=binds,
                                       return_to_service=1)
        try:
            cls.cluster.__enter__()
        except BaseException:
            cls.syslog.close()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise
        with open(cls.epilog, "w") as f:
            f.write("#!/bin/sh\n"
                    f"export SLURM_CONF={cls.cluster.conf}\n"
                    f"export GPUDIAG_SYSLOG_SOCKET={cls.syslog.path}\n"
                    f"export GPUDIAG_HEALTH={HEALTH}\n"
                    f"export GPUDIAG_HEALTH_ARGS=\"--config {SITE_CONFIG} --fs-root {FIXTURES}/$(cat {cls.fixture_name})\"\n"
                    f"exec {SOURCE}/etc/slurm/gpudiag-epilog\n")
        os.chmod(cls.epilog, 0o755)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.syslog.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def state(self, node):
        text = self.cluster.run(["scontrol", "show", "node", node]).stdout
        state = re.search(r"^   State=(\S+)", text, re.M).group(1)
        reason = re.search(r"^   Reason=(.*?)(?: \[[^\]]*@[^\]]*\])?$", text, re.M)
        return state, reason.group(1) if reason else ""

    def test_8_only_the_sick_node_is_drained(self):
        c = self.cluster
        r = c.run(["sbatch", "--parsable", "--no-requeue", "-N4", "-o", "/dev/null", "--wrap", "srun -N4 sleep 30"], cwd=self.tmp)
        job = r.stdout.strip().split(";")[0]
        c.wait_for(lambda: c.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip() == "RUNNING",
                   f"job {job} to run", timeout=60)
        # While it runs, the admin takes n3 out for maintenance and n4 down; the job then
        # ends (n4 down ends it), and every node's epilog runs.
        c.drain("admin: firmware update", node="n3")
        c.set_down("admin: replacing PSU", node="n4")
        c.wait_for(lambda: job not in c.run(["squeue", "-h", "-o", "%i"]).stdout.split(), f"job {job} to end",
                   timeout=60)
        c.wait_for(lambda: "DRAIN" in self.state("n2")[0], "the epilog to drain n2", timeout=60)
        # n3's and n4's epilogs found the same fault and logged that they left the node.
        c.wait_for(lambda: len(self.syslog.tagged("gpudiag-health exit 2")) >= 2, "the epilogs' log lines", timeout=60)
        state, reason = self.state("n2")
        self.assertTrue(reason.startswith("gpudiag: mlx5_3 port 1 is DOWN"), reason)
        self.assertEqual(self.state("n1"), ("IDLE", ""))
        self.assertEqual(self.state("n3"), ("IDLE+DRAIN", "admin: firmware update"))
        self.assertEqual(self.state("n4")[1], "admin: replacing PSU")
        self.assertTrue(self.state("n4")[0].startswith("DOWN"), self.state("n4"))
        logged = self.syslog.tagged("gpudiag-health exit 2")
        self.assertTrue(any("drained: gpudiag:" in m for m in logged), logged)


if __name__ == "__main__":
    unittest.main(verbosity=2)
