"""Adversary 9, as a real throwaway user on the test Slurm: what the node's relay thread
does with the task fds that srun options give it, and what odd MASTER_ADDR values do to
the rendezvous lookup in slurmstepd. Each case held when written; kept as regressions.
- `-o DIR/o%t` where each o<t> is a FIFO: the task's stdout is the FIFO itself, which the
  relay thread takes (S_ISFIFO): every byte arrives tagged, and with a reader that stops,
  `scancel` ends the step no later than the same step with --diag=noprefix.
- MASTER_ADDR too long for DNS, with control bytes, printf conversions, empty labels:
  the step fails in seconds naming it (escaped), and no slurmstepd is left behind."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, TwoUsersClusterTest  # noqa: E402

CLEAN = ("MASTER_ADDR", "PET_MASTER_ADDR", "MASTER_PORT", "PET_RDZV_ENDPOINT")
LINES = 2000
PRINT = ["-c", f"import sys\nfor i in range({LINES}): print('%099d' % i)\nprint('done', file=sys.stderr)"]
FULL_READER = "import sys\nd = open(sys.argv[1], 'rb').read()\nopen(sys.argv[2], 'wb').write(d)"
STALL_READER = ("import os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\nos.read(fd, 100)\n"
                "open(sys.argv[2], 'w').close()\ntime.sleep(300)")


def live_stepds():
    r = subprocess.run(["ps", "-eo", "stat=,comm="], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if line.split()[-1] == "slurmstepd" and not line.startswith("Z")]


class Adversary9Streams(TwoUsersClusterTest):
    def env(self, **extra):
        e = {k: v for k, v in self.cluster.env.items() if k not in CLEAN}
        e.update(extra)
        return e

    def fifo_step(self, diag, reader, cancel=False):
        """A 2-task step whose stdout is a FIFO per task, read by the victim's `reader`;
        returns (srun's rc, seconds from scancel (or start) to srun's end, bytes read)."""
        d = os.path.join(self.victim.home, f"fifo-{diag}-{int(cancel)}")
        self.victim.run(["mkdir", d], env=self.env(), check=True)
        readers = []
        for t in range(2):
            f = os.path.join(d, f"o{t}")
            self.victim.run(["mkfifo", "-m", "600", f], env=self.env(), check=True)
            readers.append(self.victim.popen([PYTHON, "-c", reader, f, f + ".got"], env=self.env(),
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        try:
            srun = self.victim.popen(["srun", "-n2", f"--diag={diag}", "-o", os.path.join(d, "o%t"), PYTHON, *PRINT],
                                     env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            start = time.monotonic()
            if cancel:
                self.cluster.wait_for(lambda: all(os.path.exists(os.path.join(d, f"o{t}.got")) for t in range(2)),
                              "both readers to stall", timeout=60)
                job = self.victim.run(["squeue", "-h", "-u", self.victim.name, "-o", "%i"], env=self.env()).stdout
                start = time.monotonic()
                self.victim.run(["scancel", job.strip()], env=self.env(), check=True)
            srun.communicate(timeout=90)
            took = time.monotonic() - start
            got = []
            if not cancel:
                for r in readers:
                    r.wait(timeout=30)
                for t in range(2):
                    with open(os.path.join(d, f"o{t}.got"), "rb") as f:
                        got.append(f.read())
            return srun.returncode, took, got
        finally:
            for r in readers:
                r.kill()
                r.wait()

    def test_a_fifo_per_task_is_relayed_whole_and_a_stalled_reader_does_not_hold_the_step(self):
        rc, _, got = self.fifo_step("prefix", FULL_READER)
        self.assertEqual(rc, 0)
        for t, text in enumerate(got):
            lines = text.decode().splitlines()
            self.assertEqual(len(lines), LINES + 1, text[-300:])
            self.assertTrue(all(line.startswith(f"[{self.cluster.node}:{t}] ") for line in lines), text[:300])
        _, bare, _ = self.fifo_step("noprefix", STALL_READER, cancel=True)
        rc, relayed, _ = self.fifo_step("prefix", STALL_READER, cancel=True)
        self.assertNotEqual(rc, 0)
        # Not a timing: the relay may add its 5 s drain limit at most, not hang the step.
        self.assertLess(relayed, bare + 10, (bare, relayed))
        self.cluster.wait_for(lambda: not live_stepds(), "every slurmstepd to exit", timeout=60)

    def test_b_odd_master_addrs_fail_fast_and_leave_no_slurmstepd(self):
        odd = {"long253": ".".join(["a" * 63] * 3 + ["b" * 61]), "long4000": "x" * 4000, "ctrl": "\x1b[31mevil\x07",
               "fmt": "%n%s%s%s%s", "dots": "a..b", "labels": ".".join(["a"] * 126), "space": "a b"}
        for label, name in odd.items():
            with self.subTest(label):
                r = self.victim.run(["srun", "-n2", "--diag=preflight", "echo", "ran"], env=self.env(MASTER_ADDR=name),
                                    timeout=90)
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertNotIn("ran", r.stdout)
                self.assertIn("does not resolve on", r.stderr)
                self.assertNotIn("\x1b", r.stderr)
        self.cluster.wait_for(lambda: not live_stepds(), "every slurmstepd to exit", timeout=60)
        with open(os.path.join(self.cluster.dir, "log", "slurmd.log"), errors="replace") as f:
            log = f.read()
        for crash in ("Segmentation", "core dumped", "signal 11", "signal 6", "Aborted"):
            self.assertNotIn(crash, log)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
