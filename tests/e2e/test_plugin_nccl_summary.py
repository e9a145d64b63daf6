"""srun --diag ends with a one-line summary of what NCCL did, drawn from the logs the
tasks wrote into the diag dir (here NCCL-format lines written by fake_nccl_rank.py)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import BUILD, PYTHON, PluginClusterTest  # noqa: E402

RANK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nccl_rank.py")
GPUDIAG = os.path.join(BUILD, "cli", "gpudiag")


class NcclSummary(PluginClusterTest):
    def step(self, env=None, check=True):
        return self.srun("-n4", "--diag", PYTHON, RANK, env=env, check=check)

    def summary(self, stderr):
        return [line for line in stderr.splitlines() if line.startswith("gpudiag: ")]

    def test_clean_step_says_what_nccl_used(self):
        r = self.step()
        lines = self.summary(r.stderr)
        self.assertIn("gpudiag: NCCL 2.21.5, NET/IB on 4/4 ranks (mlx5_0..3, IB), no problems", lines, r.stderr)
        details = [line for line in lines if line.startswith("gpudiag: details: gpudiag nccl-log ")]
        self.assertEqual(len(details), 1, r.stderr)
        # The command the summary points to works on that dir.
        diag_dir = details[0].split("nccl-log ", 1)[1]
        out = self.cluster.run([GPUDIAG, "nccl-log", diag_dir], check=False)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("result: clean", out.stdout)

    def test_control_bytes_in_a_log_do_not_reach_the_terminal(self):
        # Issue 21 A8: log text is any process's bytes; srun's summary and gpudiag
        # nccl-log print it escaped.
        prog = ("import os, socket\n"
                "d = os.environ['GPUDIAG_DIAG_DIR']; h = socket.gethostname().split('.')[0]; pid = os.getpid()\n"
                "o = f'{h}:{pid}:{pid} [0] NCCL INFO '\n"
                "init = 'ncclCommInitRank comm 0x55d00 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6c7e'\n"
                "L = [o + 'NCCL version 2.21.5+cuda12.4', o + init + ' - Init START',\n"
                "     o + 'NET/Socket : Using [0]lo\\x1b[31mRED:127.0.0.1<0>', o + 'Using network Sock\\x1b[2Jet',\n"
                "     o + init + ' - Init COMPLETE', f'{h}:{pid}:{pid} [0] net.cc:1 NCCL WARN evil \\xc2\\x9b2J warn']\n"
                "open(f'{d}/nccl.{h}.{pid}.log', 'w').write('\\n'.join(L) + '\\n')\n")
        r = self.srun("-n1", "--diag", PYTHON, "-c", prog)
        self.assertNotIn("\x1b", r.stderr)
        self.assertIn("Sock\\x1b[2Jet", r.stderr)
        diag_dir = [line for line in self.summary(r.stderr) if "details: gpudiag nccl-log " in line][0].split("nccl-log ")[1]
        out = self.cluster.run([GPUDIAG, "nccl-log", diag_dir], check=False)
        self.assertNotIn("\x1b", out.stdout)
        self.assertNotIn("\x9b", out.stdout)
        self.assertIn("\\x1b", out.stdout)

    def test_bad_ranks_are_named(self):
        r = self.step(env={"FAULT": "2:socket_lo"})
        text = "\n".join(self.summary(r.stderr))
        self.assertIn("NET/Socket uses lo on vm:2".replace("vm", self.cluster.node), text, r.stderr)
        self.assertIn("NET/IB on 3/4 ranks", text)
        r = self.step(env={"FAULT": "1:ib12"})
        text = "\n".join(self.summary(r.stderr))
        self.assertIn(f"IB completion error 12 (transport retry counter exceeded) on {self.cluster.node}:1", text,
                      r.stderr)
        self.assertEqual(r.returncode, 0, "a summary never changes the step's exit code")

    def test_ranks_on_sockets_beside_ib_ranks_are_named(self):
        # Half the ranks fell back to TCP: the summary says so from the logs alone (srun's
        # host has no IB here, and never decides).
        r = self.step(env={"FAULT": "2,3:no_ib"})
        text = "\n".join(self.summary(r.stderr))
        node = self.cluster.node
        self.assertIn(f"2 of 4 ranks used NET/Socket while the others used NET/IB on {node}:2, {node}:3", text,
                      r.stderr)
        self.assertIn("NET/IB on 2/4 ranks", text)
        self.assertIn("NET/Socket on 2/4 ranks", text)
        diag_dir = text.split("gpudiag: details: gpudiag nccl-log ", 1)[1].split()[0]
        out = self.cluster.run([GPUDIAG, "nccl-log", diag_dir], check=False)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("result: problems found", out.stdout)

    def test_diag_dir_not_visible_from_srun(self):
        r = self.step(env={"REMOVE_DIAG_DIR": "1"})
        lines = self.summary(r.stderr)
        self.assertTrue(any("cannot be seen from" in line and "gpudiag nccl-log" in line for line in lines), r.stderr)

    def test_no_summary_without_diag(self):
        r = self.srun("-n2", PYTHON, "-c", "print('hi')")
        self.assertEqual(self.summary(r.stderr), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
