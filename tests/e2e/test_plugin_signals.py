"""Signals that Slurm sends a step reach the program exactly once, with either output
relay as without one, under both ways slurmstepd signals a step:

- proctrack/linuxproc signals every process of the step's tree, proctrack/pgid the task's
  process group (the program directly);
- proctrack/cgroup (most GPU clusters) signals only slurmstepd's own children: the
  program itself under the node's relay thread (node_relay.h), the relay process under
  the hang watchdog (output_relay.h), which must pass it on.

Each class starts one throwaway Slurm; the cgroup one needs the cgroup v1 freezer
controller mounted writable (it is skipped, saying why, where it is not)."""
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from slurm_cluster import cgroup_v1_conf, cgroup_v1_problem  # noqa: E402
from tagged import untag  # noqa: E402

# Says whether its parent is a relay (a forked slurmstepd whose parent is slurmstepd),
# counts what it gets, and lingers a second after SIGTERM so a second copy would show.
TRAPS = r'''
import os, signal, sys, time
def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()
def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
parent = os.getppid()
relayed = comm(parent) == "slurmstepd" and comm(ppid(parent)) == "slurmstepd"
rank = os.environ["SLURM_PROCID"]
term_at = None
def on(sig, _):
    global term_at
    print(f"got {signal.Signals(sig).name} rank {rank}", flush=True)
    if sig == signal.SIGTERM and term_at is None:
        term_at = time.monotonic()
for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
    signal.signal(s, on)
print(f"ready rank {rank} job {os.environ['SLURM_JOB_ID']} relayed {relayed}", flush=True)
while term_at is None or time.monotonic() - term_at < 1.0:
    time.sleep(0.05)
print(f"done rank {rank}", flush=True)
'''


class SignalsOnce:
    """The cases, for a PluginClusterTest whose cluster sets the proctrack type."""

    def start_srun(self, *args):
        out = tempfile.TemporaryFile(dir=self.tmp)
        err = tempfile.TemporaryFile(dir=self.tmp)
        self.addCleanup(out.close)
        self.addCleanup(err.close)
        p = subprocess.Popen(["srun", *args], env=self.cluster.env, cwd=self.tmp, stdout=out, stderr=err)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        return p, out, err

    @staticmethod
    def lines(f):
        f.seek(0)
        # [host:rank] from the relay, or "rank: " from srun --label without it.
        return [re.sub(r"^\d+: ", "", untag(l)) for l in f.read().decode(errors="replace").splitlines()
                if not l.startswith("srun:")]

    def wait_until(self, predicate, what, timeout=60, why=lambda: ""):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        self.fail(f"timed out after {timeout} s waiting for {what}\n{why()}\n{self.cluster.logs()}")

    def count(self, out, word, rank):
        return self.lines(out).count(f"got {word} rank {rank}")

    RELAYS = {
        "thread": ["-n2"],                       # tagged: the node's relay thread
        "process": ["-n2", "--diag=hang=600s"],  # the watchdog's relay process per task
        "none": ["-n2", "--label"],              # srun tags, gpudiag does not
    }

    def signals_reach_program_once(self, relay):
        """scancel --signal=USR1 JOB.0, --signal=ALRM, SIGUSR2 to srun, then scancel JOB
        (SIGTERM): each rank's program sees each exactly once."""
        p, out, err = self.start_srun(*self.RELAYS[relay], PYTHON, "-c", TRAPS)
        ready = lambda: [l for l in self.lines(out) if l.startswith("ready ")]  # noqa: E731
        self.wait_until(lambda: len(ready()) == 2, "both tasks to be ready")
        job = ready()[0].split()[4]
        for line in ready():
            self.assertTrue(line.endswith(f"relayed {relay == 'process'}"), f"{line!r}: wanted relay {relay}")
        out.seek(0)
        self.assertEqual(out.read().startswith(b"["), relay != "none", "gpudiag's tags")
        self.cluster.run(["scancel", "--signal=USR1", f"{job}.0"])
        self.wait_until(lambda: all(self.count(out, "SIGUSR1", r) for r in range(2)),
                        "both programs to get scancel --signal=USR1", timeout=15)
        # A signal whose default ends a process must not end the relay in the program's
        # place (under cgroup and pgid, slurmstepd signals the relay).
        self.cluster.run(["scancel", "--signal=ALRM", f"{job}.0"])
        self.wait_until(lambda: all(self.count(out, "SIGALRM", r) for r in range(2)),
                        "both programs to get scancel --signal=ALRM", timeout=15)
        # srun passes the signals it gets on to the step the same way (as a user's kill of
        # srun, or a wrapper's, does).
        p.send_signal(signal.SIGUSR2)
        self.wait_until(lambda: all(self.count(out, "SIGUSR2", r) for r in range(2)),
                        "both programs to get the SIGUSR2 sent to srun", timeout=15)
        self.cluster.run(["scancel", job])
        p.wait(timeout=60)
        text = "\n".join(self.lines(out))
        for rank in range(2):
            self.assertEqual(self.count(out, "SIGUSR1", rank), 1, text)
            self.assertEqual(self.count(out, "SIGALRM", rank), 1, text)
            self.assertEqual(self.count(out, "SIGUSR2", rank), 1, text)
            self.assertEqual(self.count(out, "SIGTERM", rank), 1, text)
            # It ended on its own after SIGTERM, not by KillWait's SIGKILL.
            self.assertIn(f"done rank {rank}", self.lines(out), text)
        self.wait_until(lambda: not self.cluster.run(["squeue", "-h"]).stdout.strip(), "the job to leave the queue")

    def test_signals_reach_the_program_once_through_the_relay_thread(self):
        self.signals_reach_program_once("thread")

    def test_signals_reach_the_program_once_through_a_relay_process(self):
        self.signals_reach_program_once("process")

    def test_signals_reach_the_program_once_without_a_relay(self):
        self.signals_reach_program_once("none")


class SignalsUnderLinuxproc(SignalsOnce, PluginClusterTest):
    cluster_options = {"proctrack": "proctrack/linuxproc"}


class SignalsUnderPgid(SignalsOnce, PluginClusterTest):
    cluster_options = {"proctrack": "proctrack/pgid"}


@unittest.skipIf(cgroup_v1_problem(), f"proctrack/cgroup cannot run here: {cgroup_v1_problem()}")
class SignalsUnderCgroup(SignalsOnce, PluginClusterTest):
    cluster_options = {"proctrack": "proctrack/cgroup", "cgroup_conf": cgroup_v1_conf()}

    def test_hang_spread_signal_reaches_the_relay(self):
        """The hang spread's `scancel --signal=URG JOB.STEP` (hang_spread.h) reaches the
        relay itself here, not its gpudiag-hangsig listener: the node still writes its
        report, and the step goes on (hang-action=report)."""
        busy = ("import os, time\nwhile True:\n    print('alive', os.environ['SLURM_PROCID'], flush=True)\n"
                "    time.sleep(0.2)\n")
        p, out, err = self.start_srun("-n2", "--diag=hang=600s,hang-action=report", PYTHON, "-c", busy)
        self.wait_until(lambda: {"alive 0", "alive 1"} <= set(self.lines(out)), "both tasks to print")
        job = self.cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()[0]
        # The diag dir's default: $SLURM_SUBMIT_DIR (srun's cwd) /gpudiag-JOB.STEP.
        reports = lambda: glob.glob(os.path.join(self.tmp, f"gpudiag-{job}.0", "hang.*.txt"))  # noqa: E731
        sent = []

        def asked():
            # Sent again every 5 s: a node writes one report per step however often it is
            # asked (its marker), and one lost signal (a step still starting) fails no test.
            if not sent or time.monotonic() - sent[-1] > 5:
                self.cluster.run(["scancel", "--signal=URG", f"{job}.0"])
                sent.append(time.monotonic())
            return reports()
        self.wait_until(asked, "the node's hang report", timeout=30,
                        # A hang marker left in /dev/shm by an earlier cluster's step of the
                        # same JOB.STEP (killed before its relays could clean up) stops it.
                        why=lambda: f"{glob.glob(self.tmp + '/**', recursive=True)}\n{self.lines(err)}\n"
                                    f"/dev/shm: {os.listdir('/dev/shm')}")
        self.assertIsNone(p.poll(), "hang-action=report ended the step")
        self.cluster.run(["scancel", job])
        p.wait(timeout=60)
        self.assertEqual(len(reports()), 1, reports())
        if len(sent) > 1:
            print(f"\n  note: the hang report came after {len(sent)} scancel --signal=URG", file=sys.stderr)
        with open(reports()[0]) as f:
            self.assertIn("gpudiag hang report", f.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
