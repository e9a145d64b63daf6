"""`gpudiag stacks` on the jobs that need it most, against a real Slurm with gpudiag.so:
a job that holds every GPU and all memory of its node (issue 15.5), asked from outside
and from inside the job; run by root for another user's job; a neighbour whose
process fakes SLURM_JOB_ID, which must not be reported (issue 21); and the job's owner
attacking what root's `gpudiag stacks` runs as them, to reach root's terminal (issue 30.1)."""
import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import plugstack_line  # noqa: E402
from slurm_cluster import SlurmCluster  # noqa: E402
from throwaway_users import ThrowawayUsers  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build")))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GPUDIAG = os.path.join(BUILD, "cli", "gpudiag")
PYTHON = "/usr/bin/python3"
TTY_INJECT = os.path.join(BUILD, "tests", "tty_inject")
PROGRAM = f"{PYTHON} -c 'import time; time.sleep(300)'"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


class RootShell:
    """A real interactive root bash in a pty of its own, which is its controlling terminal:
    what an admin types `gpudiag stacks JOB` into."""

    def __init__(self, env):
        self.master, slave = os.openpty()
        self.tty = os.ttyname(slave)
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile", "-i"], stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True, env=env, cwd="/root",
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.lock = threading.Lock()
        self.seen = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.seen += chunk

    def text(self):
        with self.lock:
            return self.seen.decode(errors="replace").replace("\r\n", "\n")

    def type(self, line):
        os.write(self.master, line.encode() + b"\n")

    def wait_for(self, marker, timeout=120):
        """Until the output matches the regex `marker`."""
        deadline = time.monotonic() + timeout
        while not re.search(marker, self.text()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"root's shell never printed {marker!r}:\n{self.text()[-3000:]}")
            time.sleep(0.05)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)


class StacksOfBusyJobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpudiag-stacks-")
        os.chmod(cls.tmp, 0o755)
        config = os.path.join(cls.tmp, "gpudiag.yaml")
        shutil.copy(os.path.join(SOURCE, "etc", "gpudiag.yaml"), config)
        plugstack = os.path.join(cls.tmp, "plugstack.conf")
        with open(plugstack, "w") as f:
            f.write(plugstack_line(os.path.join(BUILD, 'spank', 'gpudiag.so'), config, cls.tmp))
        cls.users = ThrowawayUsers("victim", "attacker")
        cls.users.__enter__()
        # 4 GPUs and 1000 MiB of memory as consumable resources: a job can hold all of both.
        cls.cluster = SlurmCluster(extra_conf=[f"PlugStackConfig={plugstack}"], gres={"gpu": 4}, real_memory=1000,
                                   select_params="CR_Core_Memory")
        try:
            cls.cluster.__enter__()
        except BaseException:
            cls.users.__exit__(None, None, None)
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.users.__exit__(None, None, None)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def submit(self, *args):
        victim = self.users["victim"]
        r = victim.run(["sbatch", "--parsable", *args], env=self.cluster.env, check=True)
        job = r.stdout.strip().split(";")[0]
        self.addCleanup(self.end_job, job)
        return job

    def end_job(self, job):
        self.cluster.run(["scancel", job], check=False)
        self.cluster.wait_for(lambda: job not in self.cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split(),
                              f"job {job} to end", timeout=60)

    def wait_for_step(self, step):
        self.cluster.wait_for(lambda: step in self.cluster.run(["squeue", "-h", "-s", "-o", "%i"]).stdout.split(),
                              f"step {step} to run")
        # Until both tasks have exec'd their program (behind a relay process or not).
        def programs():
            pids = [l.split()[0] for l in self.cluster.run(["scontrol", "listpids", step], check=False)
                    .stdout.splitlines()[1:] if l.split() and l.split()[0].isdigit()]
            return [p for p in pids if read(f"/proc/{p}/comm").strip() == "python3"]
        self.cluster.wait_for(lambda: len(programs()) >= 2, f"the programs of {step}")

    def assert_two_ranks_of(self, out, job):
        self.assertIn(f"gpudiag stacks: job {job}", out)
        for rank in (0, 1):
            self.assertIn(f"== task rank {rank}: program pid", out)
        self.assertEqual(out.count("cmdline: /usr/bin/python3 -c import time; time.sleep(300)"), 2, out[:3000])

    def test_job_holding_every_gpu_and_all_memory(self):
        job = self.submit("-n2", "--gres=gpu:4", "--mem=0", "-o", "/dev/null", "--wrap", f"srun -n2 {PROGRAM}")
        self.wait_for_step(f"{job}.0")
        t0 = time.monotonic()
        r = self.users["victim"].run([GPUDIAG, "stacks", f"{job}.0"], env=self.cluster.env, timeout=90)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr)
        self.assert_two_ranks_of(r.stdout, job)
        print(f"gpudiag stacks on a job holding all GPUs and memory: {time.monotonic() - t0:.1f} s", file=sys.stderr)

    def test_from_inside_the_job(self):
        # Inside an allocation, SLURM_NTASKS, SLURM_MEM_PER_CPU and SLURM_GPUS_PER_TASK are
        # srun options in disguise; with them the stacks step asked for the job's memory
        # ("Memory required by task is not available") and ran one task per job task.
        out = os.path.join(self.users["victim"].home, "stacks.out")
        script = os.path.join(self.users["victim"].home, "job.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    f"srun -n2 {PROGRAM} &\n"
                    "while [ \"$(pgrep -c -x -u $(id -u) python3)\" -lt 2 ]; do sleep 0.2; done\n"
                    f"timeout 60 {GPUDIAG} stacks $SLURM_JOB_ID.0 > {out} 2>&1\n"
                    f"echo \"exit $?\" >> {out}\n"
                    "kill %1\n")
        os.chmod(script, 0o755)
        victim = self.users["victim"]
        os.chown(script, victim.uid, victim.gid)
        job = self.submit("-n2", "--gpus-per-task=2", "--mem-per-cpu=500", "-o", "/dev/null", script)
        self.cluster.wait_for(lambda: "exit " in read(out), "the job's gpudiag stacks", timeout=90)
        text = read(out)
        self.assertIn("exit 0", text, text[-2000:])
        self.assertNotIn("srun: error", text, text[-2000:])
        self.assertEqual(text.count(f"gpudiag stacks: job {job}.0 on"), 1, text[-2000:])
        self.assert_two_ranks_of(text, job)

    def test_root_gets_the_owners_stacks_and_not_a_fakers(self):
        job = self.submit("-n2", "--gres=gpu:4", "--mem=0", "-o", "/dev/null", "--wrap", f"srun -n2 {PROGRAM}")
        self.wait_for_step(f"{job}.0")
        # A neighbour's process that claims to be rank 0 of the job's step 0.
        faker = self.users["attacker"].popen(["sleep", "3131"], env=dict(self.cluster.env, SLURM_JOB_ID=job,
                                                                         SLURM_JOBID=job, SLURM_STEP_ID="0",
                                                                         SLURM_PROCID="0"))
        self.addCleanup(faker.wait)
        self.addCleanup(faker.kill)
        time.sleep(0.3)
        # On the node itself, root reads every environment: Slurm's records decide.
        local = self.cluster.run([GPUDIAG, "stacks", "--local", job], check=False, timeout=90)
        self.assertEqual(local.returncode, 0, local.stdout[-2000:] + local.stderr)
        self.assertNotIn("sleep 3131", local.stdout)
        self.assert_two_ranks_of(local.stdout, job)
        # From anywhere: root becomes the job's owner for the step.
        r = self.cluster.run([GPUDIAG, "stacks", job], check=False, timeout=90, cwd="/root")
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr)
        self.assertNotIn("Access/permission denied", r.stderr)
        self.assert_two_ranks_of(r.stdout, job)
        # The faker's command line, not its number: "3131" turned up inside a stack address.
        self.assertNotIn("sleep 3131", r.stdout)
        self.assertNotRegex(r.stdout, rf"pid {faker.pid}\b")

    def test_the_owner_cannot_reach_roots_terminal_through_gpudiag_stacks(self):
        # Issue 30.1: root types `gpudiag stacks JOB` into an interactive shell. The job's
        # owner, outside any job, ptraces every process of theirs that is not in a step
        # (what root's gpudiag runs as them: srun) and makes it push a command into
        # whatever terminal it holds (TIOCSTI on fds 0-2 and on /dev/tty). Before the fix
        # srun held root's terminal, and root's shell ran the command as root.
        owner = self.users["victim"]
        job = self.submit("-n2", "--gres=gpu:4", "--mem=0", "-o", "/dev/null", "--wrap", f"srun -n2 {PROGRAM}")
        self.wait_for_step(f"{job}.0")
        secret = secrets.token_hex(8)
        shell = RootShell(dict(self.cluster.env, HOME="/root", TERM="dumb", PS1="root# ",
                               GPUDIAG_ROOT_SECRET=secret))
        self.addCleanup(shell.close)
        for round_, kill in (("killed", True), ("let-go", False)):
            with self.subTest(round_):
                pwned = f"/tmp/PWNED-{secrets.token_hex(6)}"
                self.addCleanup(lambda p=pwned: os.path.exists(p) and os.unlink(p))
                attack = owner.popen([TTY_INJECT, "--command", f"touch {pwned}", "--timeout", "90",
                                      *(["--kill"] if kill else [])],
                                     env=self.cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.assertIn("watching", attack.stderr.readline())
                shell.type(f"{GPUDIAG} stacks {job}; echo RC-$?-{round_}")
                out, err = attack.communicate(timeout=120)
                shell.wait_for(rf"RC-\d+-{round_}")
                # Whatever reached the terminal's input runs before this line.
                shell.type(f"echo END-$((40+2))-{round_}")
                shell.wait_for(f"END-42-{round_}")
                targets = [json.loads(line) for line in out.splitlines()]
                transcript = shell.text()
                print(f"{round_}: the attack on {[(t['comm'], t['tiocsti']) for t in targets]}", file=sys.stderr)
                self.assertFalse(os.path.exists(pwned), "root's shell ran the owner's command:\n"
                                 f"{json.dumps(targets, indent=1)}\n{transcript[-3000:]}")
                self.assertIn("srun", [t["comm"] for t in targets], f"the attack never reached srun: {out}{err}")
                for t in targets:
                    what = json.dumps(t)
                    self.assertEqual(t["tty_nr"], 0, f"a process of the owner has a controlling tty: {what}")
                    self.assertNotEqual(t["session"], shell.proc.pid, f"in root's session: {what}")
                    for fd, path in t["fds"].items():
                        self.assertNotEqual(path, shell.tty, f"holds root's terminal as fd {fd}: {what}")
                        self.assertFalse(path.startswith(("/dev/pts", "/dev/tty", "/dev/console")), what)
                    self.assertEqual(t["fds"]["0"], "/dev/null", what)
                    self.assertRegex(t["fds"]["1"], r"^pipe:", what)
                    self.assertRegex(t["fds"]["2"], r"^pipe:", what)
                    self.assertEqual(t["cwd"], "/", f"holds root's cwd: {what}")
                    self.assertNotIn("GPUDIAG_ROOT_SECRET", t["env"], f"holds root's environment: {what}")
                    self.assertTrue(all(rc != 0 for rc in t["tiocsti"].values()), f"an ioctl worked: {what}")
                if not kill:
                    self.assertIn(f"RC-0-{round_}", transcript)
                    self.assert_two_ranks_of(transcript[transcript.rfind(f"stacks {job}; echo RC"):], job)

    def test_root_on_a_finished_job_is_told_clearly(self):
        r = self.cluster.run([GPUDIAG, "stacks", "999999"], check=False, timeout=30)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"^gpudiag: .*999999")


if __name__ == "__main__":
    unittest.main(verbosity=2)
