"""The hang watchdog under a hostile neighbour (issue 21, items 1, 4, 5, 6), on a real
Slurm with two real unprivileged accounts: a victim who runs the steps and an attacker
who shares the node and a world-writable (sticky) directory with it.

- a FIFO or a link planted at the victim's report path neither blocks the watchdog nor
  receives the report; the step ends on time, the report is the victim's (0600) and the
  message says where it is, the link's target is untouched, the node is not drained;
- a squatted state dir (/dev/shm/gpudiag-<uid>-<job>.<step>) does not switch the
  watchdog off;
- a task that closed its stdout and stderr is still watched, and SIGKILLed when it
  ignores SIGTERM;
- processes that stack tools cannot trace (stuck in vfork) do not delay the kill;
- a diag dir that stops answering (frozen, as a hung NFS mount) delays the kill by one
  deadline at most, and the report comes on stderr;
- control bytes in a command line reach the report escaped."""
import glob
import os
import shutil
import stat
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from throwaway_users import ThrowawayUsers  # noqa: E402

HANG_EXIT = 200
KILL_GRACE = 2      # plugin.hang.kill_grace for this class
REPORT_DEADLINE = 10  # the watchdog's bound on the stack report
SLACK = 8           # starting the step, the relay's 1 s tick, SIGTERM, srun's exit
STEP_LIMIT = 45     # a step still running by then is the bug: cancel it

# Forks N children; each vforks a child that stops itself, so the N parents sit in D
# state (vfork) where ptrace-based stack tools wait until their timeout.
VFORK_STUCK = r'''
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  for (int i = 0; i < n; ++i) {
    if (fork() == 0) {
      if (vfork() == 0) { raise(SIGSTOP); _exit(0); }
      _exit(0);
    }
  }
  for (;;) pause();
}
'''


class HostileNeighbour(PluginClusterTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(cls.config) as f:
            cls.good_config = f.read()
        with open(cls.config, "w") as f:
            f.write(cls.good_config.replace("\nplugin:\n", f"\nplugin:\n  hang:\n    kill_grace: {KILL_GRACE}s\n", 1))
        cls.users = ThrowawayUsers("victim", "attacker").__enter__()
        cls.victim, cls.attacker = cls.users["victim"], cls.users["attacker"]
        cls.shared = os.path.join(cls.tmp, "shared")
        os.makedirs(cls.shared)
        os.chmod(cls.shared, 0o1777)
        src = os.path.join(cls.tmp, "vfork_stuck.c")
        with open(src, "w") as f:
            f.write(VFORK_STUCK)
        cls.vfork_stuck = os.path.join(cls.tmp, "vfork_stuck")
        subprocess.run(["cc", "-O1", "-o", cls.vfork_stuck, src], check=True)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.users.__exit__(None, None, None)
        finally:
            super().tearDownClass()

    def setUp(self):
        self.squats = []

    def tearDown(self):
        for path in self.squats:
            shutil.rmtree(path, ignore_errors=True)
        for name in os.listdir(self.shared):
            p = os.path.join(self.shared, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        self.cluster.wait_for(lambda: subprocess.run(["pgrep", "-u", self.victim.name], capture_output=True).returncode != 0,
                              "the victim's processes to end", timeout=60)
        state, reason = self.cluster.node_state(), self.cluster.node_reason()
        if "DRAIN" in state:
            self.cluster.resume()  # so that the next test starts on a usable node
        self.assertNotIn("DRAIN", state, reason)
        self.cluster.wait_for(lambda: subprocess.run(["pgrep", "-u", self.victim.name], capture_output=True).returncode != 0,
                              "the victim's processes to end")
        self.assertEqual(glob.glob(f"/dev/shm/gpudiag-{self.victim.uid}-*"), [], "a state dir was left behind")

    def victim_srun(self, *args, cwd=None):
        """srun as the victim; returns (CompletedProcess or None when it outran STEP_LIMIT, seconds)."""
        start = time.monotonic()
        try:
            r = self.victim.run(["srun", *args], env=self.cluster.env, cwd=cwd, timeout=STEP_LIMIT)
        except subprocess.TimeoutExpired:
            self.cluster.run(["scancel", "-u", self.victim.name], check=False)
            return None, time.monotonic() - start
        return r, time.monotonic() - start

    def assert_hang_ended(self, r, took, limit):
        self.assertIsNotNone(r, f"the step still ran after {STEP_LIMIT} s: the watchdog did not end it")
        print(f"  step ended after {took:.1f} s (limit {limit} s)", file=sys.stderr)
        self.assertEqual(r.returncode, HANG_EXIT, r.stderr)
        self.assertLess(took, limit, r.stderr)

    def report_named_in(self, stderr):
        for line in stderr.splitlines():
            if "gpudiag: no output for" in line and "stacks in " in line:
                return line.split("stacks in ", 1)[1].split(";", 1)[0]
        self.fail(f"no hang message in {stderr!r}")

    def test_a_shared_dir_with_a_planted_fifo_is_refused_before_the_program_starts(self):
        # The attacker's way in is a diag dir others can write: the diag-dir rule refuses
        # it, so the planted FIFO is never opened and the step fails at once, saying why.
        fifo = os.path.join(self.shared, f"hang.{self.cluster.node}.txt")
        self.attacker.run(["mkfifo", "-m", "0666", fifo], check=True)
        r, took = self.victim_srun("-n1", f"--diag=hang=2s,dir={self.shared}", "sleep", "600")
        self.assertIsNotNone(r, "the step still ran")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"gpudiag: the diag dir {self.shared} belongs to another user", r.stderr)
        self.assertLess(took, SLACK, r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def own_diag_dir(self, name):
        """A diag dir the diag-dir rule accepts: the victim's own, 0700."""
        d = os.path.join(self.shared, name)
        self.victim.run(["mkdir", "-m", "700", d], check=True)
        return d

    def test_fifo_at_the_report_path_neither_blocks_nor_gets_the_report(self):
        # Defence in depth: in the user's own dir a FIFO can still be there (a program of
        # theirs, a leftover). The report must neither block on it nor go into it.
        d = self.own_diag_dir("fifo")
        fifo = os.path.join(d, f"hang.{self.cluster.node}.txt")
        self.victim.run(["mkfifo", "-m", "0600", fifo], check=True)
        r, took = self.victim_srun("-n1", f"--diag=hang=2s,dir={d}", "sleep", "600")
        self.assert_hang_ended(r, took, 2 + REPORT_DEADLINE + SLACK)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        report = self.report_named_in(r.stderr)
        self.assertNotEqual(report, fifo)
        self.assertEqual(os.path.dirname(report), d)
        st = os.lstat(report)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (self.victim.uid, 0o600))
        with open(report) as f:
            self.assertIn("gpudiag hang report: step", f.read())

    def test_link_at_the_report_path_is_not_followed(self):
        precious = os.path.join(self.victim.home, "precious")
        self.victim.run(["sh", "-c", "echo keep me > precious"], check=True)
        d = self.own_diag_dir("link")
        link = os.path.join(d, f"hang.{self.cluster.node}.txt")
        self.victim.run(["ln", "-s", precious, link], check=True)
        r, took = self.victim_srun("-n1", f"--diag=hang=2s,dir={d}", "sleep", "600")
        self.assert_hang_ended(r, took, 2 + REPORT_DEADLINE + SLACK)
        with open(precious) as f:
            self.assertEqual(f.read(), "keep me\n")
        report = self.report_named_in(r.stderr)
        self.assertNotEqual(report, link)
        self.assertEqual(os.lstat(report).st_uid, self.victim.uid)

    def test_squatted_state_dir_does_not_switch_the_watchdog_off(self):
        # The attacker learns the last job id from a step of its own and takes the
        # victim's state dir names for the next jobs.
        r = self.attacker.run(["srun", "-n1", "printenv", "SLURM_JOB_ID"], env=self.cluster.env, check=True)
        last = int(r.stdout.strip().split()[-1])
        for job in range(last + 1, last + 4):
            path = f"/dev/shm/gpudiag-{self.victim.uid}-{job}.0"
            self.squats.append(path)
            self.attacker.run(["mkdir", "-m", "0700", path], check=True)
        r, took = self.victim_srun("-n2", "--diag=hang=2s", "sleep", "600")
        self.assert_hang_ended(r, took, 2 + REPORT_DEADLINE + SLACK)
        self.assertRegex(r.stderr, rf"gpudiag: /dev/shm/gpudiag-{self.victim.uid}-\d+\.0 is taken by uid "
                                   rf"{self.attacker.uid} \(not this user's private directory\); the hang watchdog uses "
                                   rf"/dev/shm/gpudiag-{self.victim.uid}-\d+\.0\.1 instead")
        self.assertNotIn("hang watchdog off", r.stderr)

    def next_job_ids(self):
        r = self.attacker.run(["srun", "-n1", "printenv", "SLURM_JOB_ID"], env=self.cluster.env, check=True)
        last = int(r.stdout.strip().split()[-1])
        return range(last + 1, last + 4)

    def test_every_state_dir_name_squatted_leaves_each_task_watching_itself(self):
        # Issue 21 A2: all nine names of the next jobs taken: weaker, never off.
        for job in self.next_job_ids():
            for suffix in [""] + [f".{i}" for i in range(1, 9)]:
                path = f"/dev/shm/gpudiag-{self.victim.uid}-{job}.0{suffix}"
                self.squats.append(path)
                self.attacker.run(["mkdir", "-m", "0700", path], check=True)
        r, took = self.victim_srun("-n2", "--diag=hang=2s", "sleep", "600", cwd=self.victim.home)
        self.assert_hang_ended(r, took, 2 + REPORT_DEADLINE + SLACK)
        self.assertRegex(r.stderr, rf"gpudiag: /dev/shm/gpudiag-{self.victim.uid}-\d+\.0 and the 8 names after it are "
                                   rf"taken by another user \(uid {self.attacker.uid}\); the hang watchdog stays on, "
                                   rf"but task [01] watches only its own output")

    def test_a_squatted_default_diag_dir_keeps_the_watchdog_with_the_report_on_stderr(self):
        # Issue 21 A1: the attacker takes the default diag dir names of the next jobs in
        # the shared submit dir; the victim's hang=2s step must still be ended.
        for job in self.next_job_ids():
            self.attacker.run(["mkdir", "-m", "0755", os.path.join(self.shared, f"gpudiag-{job}.0")], check=True)
        r, took = self.victim_srun("-n1", "--diag=hang=2s", "sh", "-c", "sleep 600; echo SURVIVED", cwd=self.shared)
        self.assert_hang_ended(r, took, 2 + REPORT_DEADLINE + KILL_GRACE + SLACK)
        self.assertNotIn("SURVIVED", r.stdout)
        self.assertRegex(r.stderr, r"gpudiag: no NCCL log files for this step; the hang watchdog stays on, its report "
                                   r"goes to the task's stderr: the diag dir \S+/gpudiag-\d+\.0 belongs to another user")
        self.assertEqual(self.report_named_in(r.stderr), "stderr")
        self.assertIn("gpudiag hang report: step", r.stderr)

    def test_closed_stdout_and_stderr_do_not_switch_the_watchdog_off(self):
        r, took = self.victim_srun("-n1", "--diag=hang=3s", "sh", "-c", "exec sleep 20 >log 2>&1",
                                   cwd=self.victim.home)
        self.assert_hang_ended(r, took, 3 + REPORT_DEADLINE + SLACK)
        # Two tasks; rank 1 closed its output and ignores SIGTERM: it gets SIGKILL.
        prog = 'if [ "$SLURM_PROCID" = 1 ]; then trap "" TERM; exec sleep 600 >/dev/null 2>&1; fi; exec sleep 600'
        r, took = self.victim_srun("-n2", "--diag=hang=3s", "sh", "-c", prog, cwd=self.victim.home)
        self.assert_hang_ended(r, took, 3 + REPORT_DEADLINE + KILL_GRACE + SLACK)

    def test_a_diag_dir_that_does_not_answer_does_not_delay_the_kill(self):
        # Issue 30 leftover: the diag dir stops answering while the step runs (an ext4
        # image frozen with fsfreeze: a write there waits in the kernel, as on a hung NFS
        # mount). The kill waits one diag-dir deadline (5 s) at most, the report comes on
        # stderr. Frozen only once the step has started: the task's start makes the dir.
        missing = [t for t in ("mkfs.ext4", "fsfreeze", "mount", "umount") if not shutil.which(t)]
        if missing:
            self.skipTest(f"missing: {missing}")
        img, mnt = os.path.join(self.tmp, "frozen.img"), os.path.join(self.tmp, "frozen")
        os.makedirs(mnt, exist_ok=True)
        with open(img, "wb") as f:
            f.truncate(16 << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", img], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], check=False)
        # Should this test die while the image is frozen, nothing stays stuck for long.
        thawer = subprocess.Popen(["sh", "-c", f"sleep {STEP_LIMIT + 60}; fsfreeze -u {mnt}"], start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            os.chmod(mnt, 0o755)
            d = os.path.join(mnt, "diag")
            os.mkdir(d, 0o700)
            os.chown(d, self.victim.uid, -1)
            start = time.monotonic()
            p = self.victim.popen(["srun", "-n1", f"--diag=hang=2s,dir={d}", "sh", "-c", "echo started; exec sleep 600"],
                                  env=self.cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertIn("started", p.stdout.readline())
            subprocess.run(["fsfreeze", "-f", mnt], check=True)
            try:
                out, err = p.communicate(timeout=STEP_LIMIT)
                r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
            except subprocess.TimeoutExpired:
                subprocess.run(["fsfreeze", "-u", mnt], check=False)
                self.cluster.run(["scancel", "-u", self.victim.name], check=False)
                p.kill()
                p.communicate()
                r = None
            took = time.monotonic() - start
        finally:
            subprocess.run(["fsfreeze", "-u", mnt], check=False, capture_output=True)
            os.killpg(thawer.pid, 9)
            thawer.wait()
        self.cluster.wait_for(lambda: subprocess.run(["pgrep", "-u", self.victim.name], capture_output=True).returncode != 0,
                              "the victim's processes to end", timeout=60)
        self.assert_hang_ended(r, took, 2 + 5 + REPORT_DEADLINE + SLACK)
        self.assertIn(f"gpudiag: the diag dir {d} gave no answer within 5 s (a hung NFS mount or a frozen filesystem?); "
                      "the hang report follows on stderr", r.stderr)
        self.assertIn("gpudiag hang report: step", r.stderr)
        self.assertIn("stacks in stderr; ending step (exit code 200)", r.stderr)

    def test_processes_stack_tools_cannot_trace_do_not_delay_the_kill(self):
        # Six processes in vfork: one after the other, at 15 s per tool, 90 s and more.
        r, took = self.victim_srun("-n1", "--diag=hang=3s", self.vfork_stuck, "6", cwd=self.victim.home)
        self.assert_hang_ended(r, took, 3 + REPORT_DEADLINE + KILL_GRACE + SLACK)
        with open(self.report_named_in(r.stderr)) as f:
            report = f.read()
        self.assertIn("no answer within", report)
        self.assertNotIn("slurmctld", report)

    def test_control_bytes_in_a_command_line_are_escaped_in_the_report(self):
        r, took = self.victim_srun("-n1", "--diag=hang=2s", PYTHON, "-c", "import time; time.sleep(600)",
                                   "\x1b]0;pwned\x07\x1b[2J", cwd=self.victim.home)
        self.assertIsNotNone(r)
        with open(self.report_named_in(r.stderr), "rb") as f:
            report = f.read()
        self.assertNotIn(b"\x1b", report)
        self.assertNotIn(b"\x07", report)
        self.assertIn(b"time.sleep(600) \\x1b]0;pwned\\x07\\x1b[2J", report)


if __name__ == "__main__":
    unittest.main(verbosity=2)
