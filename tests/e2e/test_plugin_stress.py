"""The output relay under stress in a real srun/slurmstepd (issue 9): a client that
stops reading, srun killed mid-step, scancel during heavy output, a program that
ignores SIGTERM, binary and NUL bytes, and children that outlive their task. Both
relays: the node's thread in slurmstepd (node_relay.h, every tagged step) and the relay
process per task (output_relay.h, a step with the hang watchdog).

The assertions are the relay's promises: no byte lost (or, where the step is killed,
no byte lost before the kill and no torn line), the exit status kept, bounded memory,
and a clean end: no relay or task process left behind, the daemons up, the node idle."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from tagged import strip  # noqa: E402

# Numbered lines: LINES of them, or forever when LINES is 0. argv[1] is a marker that
# lets the test find the step's processes in /proc.
NUMBERED = r'''
import os, sys
r = os.environ["SLURM_PROCID"].encode()
limit = int(sys.argv[2])
out = sys.stdout.buffer
i = 0
while limit == 0 or i < limit:
    n = 20000 if limit == 0 else min(20000, limit - i)
    out.write(b"".join(b"%s:%d\n" % (r, k) for k in range(i, i + n)))
    out.flush()
    i += n
'''

BINARY = r'''
import os, random, sys
rank = int(os.environ["SLURM_PROCID"])
for stream, size, seed in ((sys.stdout.buffer, 2 << 20, rank), (sys.stderr.buffer, 256 << 10, 100 + rank)):
    rng = random.Random(seed)
    data = bytes(rng.getrandbits(8) for _ in range(size))
    off = 0
    while off < len(data):
        n = rng.choice((1, 7, 100, 4096, 70000))
        stream.write(data[off:off + n])
        stream.flush()
        off += n
'''

IGNORES_TERM = r'''
import os, signal, sys, time
def on_term(*_):
    print("TERM ignored", flush=True)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.1)
    print("alive", flush=True)
'''


def binary_expected(rank, size, seed):
    import random
    rng = random.Random(seed)
    return bytes(rng.getrandbits(8) for _ in range(size))


def numbered_prefix_ok(data, rank):
    """True when `data` is the start of rank's numbered stream: no gap, no torn middle."""
    lines = data.split(b"\n")
    whole, last = lines[:-1], lines[-1]
    r = str(rank).encode()
    for k, line in enumerate(whole):
        if line != b"%s:%d" % (r, k):
            return False
    return (b"%s:%d" % (r, len(whole))).startswith(last)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:  # it ended meanwhile
        return b""


def processes_with(marker):
    """pids whose command line holds `marker`."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and marker.encode() in cmdline(p)]


def status_field(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return line.split()[1]
    except OSError:
        return None
    return None


def rss_kib(pid):
    v = status_field(pid, "VmRSS")
    return int(v) if v else None


class RelayStress(PluginClusterTest):
    # The node's relay thread: the programs are slurmstepd's own children, and the relay
    # is that slurmstepd.
    step_args = ()
    relays_per_node = 1

    def tag(self, rank):
        return f"[{self.cluster.node}:{rank}]".encode()

    def marker(self):
        return f"gpudiag-stress-{self._testMethodName}-{os.getpid()}"

    def start_srun(self, *args):
        """srun in the background with stdout and stderr going to files."""
        out = tempfile.TemporaryFile(dir=self.tmp)
        err = tempfile.TemporaryFile(dir=self.tmp)
        p = subprocess.Popen(["srun", *self.step_args, *args], env=self.cluster.env, cwd=self.tmp, stdout=out, stderr=err)
        return p, out, err

    @staticmethod
    def read(f):
        f.seek(0)
        return f.read()

    def wait_until(self, predicate, what, timeout=60, srun=None):
        """srun: (process, stderr file) of the step waited for, whose state and stderr a
        failure shows too."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        said = ""
        if srun:
            p, err = srun
            said = f"srun {'still running' if p.poll() is None else f'exited {p.returncode}'}, its stderr:\n" + \
                self.read(err)[-3000:].decode(errors="replace") + "\n"
        self.fail(f"timed out after {timeout} s waiting for {what}\n{said}{self.cluster.logs()}")

    def job_ids(self):
        return self.cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()

    def cancel_all(self):
        for job in self.job_ids():
            self.cluster.run(["scancel", job])

    def start_step(self, marker, *args, first_bytes=1):
        """srun -n2 in the background, once both programs run and `first_bytes` arrived."""
        p, out, err = self.start_srun("-n2", *args)
        self.wait_until(lambda: len(self.programs_of(marker)) == 2, "both programs to start", srun=(p, err))
        relays = self.relays_of(marker)
        self.assertEqual(len(relays), self.relays_per_node, relays)
        self.wait_until(lambda: os.fstat(out.fileno()).st_size >= first_bytes, f"{first_bytes} bytes of output",
                        srun=(p, err))
        return p, out, err, relays

    @staticmethod
    def programs_of(marker):
        """{program: its parent}, for the programs whose parent is slurmstepd or a relay
        process (which never execs, so it looks like slurmstepd)."""
        programs = {}
        for pid in processes_with(marker):
            ppid = status_field(pid, "PPid")
            if ppid and b"slurmstepd" in cmdline(ppid):
                programs[pid] = int(ppid)
        return programs

    def relays_of(self, marker):
        """The processes that relay: the programs' parents."""
        return set(self.programs_of(marker).values())

    def assert_clean_end(self, marker, relays=()):
        """Nothing of the step lives on, the daemons are up, the node takes the next step."""
        self.wait_until(lambda: not processes_with(marker), "the step's processes to end", timeout=60)
        self.wait_until(lambda: not any(os.path.exists(f"/proc/{r}") for r in relays), "the relays to end", 30)
        self.wait_until(lambda: not self.job_ids(), "the job to leave the queue", timeout=60)
        self.assertTrue(all(p.poll() is None for _, p in self.cluster.procs), "a daemon died")
        self.assertEqual(self.srun("-n1", "echo", "next").stdout, "next\n")

    def assert_whole_lines(self, data, ranks):
        """Every line srun printed is one of ours, whole: a tag of a known rank and a SEP."""
        tags = [self.tag(r) for r in ranks]
        for line in data.split(b"\n")[:-1]:
            if line.startswith(b"srun:"):
                continue
            self.assertTrue(any(line.startswith(t) and line[len(t):len(t) + 1] in (b" ", b"+") for t in tags),
                            f"torn or untagged line: {line[:120]!r}")

    # -- the cases ----------------------------------------------------------------------

    def test_reader_stopped_then_resumed_loses_nothing_and_memory_stays_bounded(self):
        marker = self.marker()
        lines = 400000  # about 3.5 MB per task: far more than the pipes and Slurm's buffers hold
        p, out, err, relays = self.start_step(marker, PYTHON, "-c", NUMBERED, marker, str(lines))
        try:
            os.kill(p.pid, signal.SIGSTOP)
            time.sleep(2)  # the relays fill slurmstepd, then block writing
            before = {r: rss_kib(r) for r in relays}
            size_stopped = os.fstat(out.fileno()).st_size
            time.sleep(3)
            after = {r: rss_kib(r) for r in relays}
            # The programs are blocked too, not racing ahead into the relay's memory.
            self.assertTrue(processes_with(marker), "the programs finished while srun was stopped")
            print(f"relay VmRSS while srun is stopped, KiB: {before} then 3 s later {after}; "
                  f"{size_stopped} bytes had reached srun", flush=True)
            for r in relays:
                self.assertIsNotNone(after[r], f"relay {r} died while srun was stopped")
                self.assertLess(after[r] - before[r], 1024, f"relay {r} grew while blocked: {before[r]} -> {after[r]} KiB")
                self.assertLess(after[r], 64 * 1024, f"relay {r} uses {after[r]} KiB")
        finally:
            os.kill(p.pid, signal.SIGCONT)
        self.assertEqual(p.wait(timeout=300), 0, self.read(err)[-2000:])
        data = self.read(out)
        self.assertGreater(len(data), size_stopped, "output resumed after SIGCONT")
        for rank in range(2):
            got = strip(data, self.tag(rank))
            want = b"".join(b"%d:%d\n" % (rank, k) for k in range(lines))
            self.assertEqual(len(got), len(want), f"rank {rank}")
            self.assertTrue(got == want, f"rank {rank}: bytes differ")
        self.assert_clean_end(marker, relays)

    def test_srun_killed_mid_step(self):
        marker = self.marker()
        p, out, err, relays = self.start_step(marker, PYTHON, "-c", NUMBERED, marker, "0", first_bytes=1 << 20)
        p.kill()
        p.wait(timeout=30)
        # Nobody reads the step's output any more. The relays must not block the step's
        # end: cancelling it ends every process.
        self.cancel_all()
        self.assert_clean_end(marker, relays)
        data = self.read(out)
        self.assert_whole_lines(data[:data.rfind(b"\n") + 1], range(2))

    def test_scancel_during_heavy_output(self):
        marker = self.marker()
        p, out, err, relays = self.start_step(marker, PYTHON, "-c", NUMBERED, marker, "0", first_bytes=4 << 20)
        self.cancel_all()
        rc = p.wait(timeout=60)
        self.assertNotEqual(rc, 0)
        data = self.read(out)
        self.assert_whole_lines(data, range(2))
        for rank in range(2):
            got = strip(data, self.tag(rank))
            self.assertGreater(len(got), 0, f"rank {rank}")
            self.assertTrue(numbered_prefix_ok(got, rank), f"rank {rank}: a gap or a torn line")
        self.assert_clean_end(marker, relays)

    def test_program_that_ignores_sigterm(self):
        marker = self.marker()
        p, out, err = self.start_srun("-n2", PYTHON, "-c", IGNORES_TERM, marker)
        self.wait_until(lambda: self.read(out).count(b"ready") == 2, "both tasks to be ready")
        relays = self.relays_of(marker)
        self.assertEqual(len(relays), self.relays_per_node, relays)
        cancelled = time.monotonic()
        self.cancel_all()
        p.wait(timeout=60)
        took = time.monotonic() - cancelled
        data = self.read(out)
        # The relay outlives SIGTERM: what the program prints on it still arrives. After
        # KillWait (5 s here) SIGKILL ends everything.
        for rank in range(2):
            got = strip(data, self.tag(rank))
            self.assertIn(b"TERM ignored\n", got, f"rank {rank}")
            self.assertIn(b"alive\nalive\n", got[got.find(b"TERM ignored"):], f"rank {rank}: output after TERM")
        self.assertGreater(took, 3, "the step ended before KillWait: SIGTERM was not ignored")
        self.assert_whole_lines(data, range(2))
        self.assert_clean_end(marker, relays)

    def test_binary_and_nul_bytes_pass_exactly(self):
        r = self.srun(*self.step_args, "-n2", PYTHON, "-c", BINARY, text=False, timeout=300)
        for rank in range(2):
            got_out = strip(r.stdout, self.tag(rank))
            got_err = strip(r.stderr, self.tag(rank))
            want_out = binary_expected(rank, 2 << 20, rank)
            want_err = binary_expected(rank, 256 << 10, 100 + rank)
            self.assertIn(b"\x00", want_out)
            self.assertEqual(len(got_out), len(want_out), f"rank {rank} stdout")
            self.assertTrue(got_out == want_out, f"rank {rank} stdout differs")
            self.assertEqual(len(got_err), len(want_err), f"rank {rank} stderr")
            self.assertTrue(got_err == want_err, f"rank {rank} stderr differs")

    def test_children_that_outlive_their_task(self):
        marker = self.marker()
        # The task starts a child that writes forever and a silent one that just holds
        # the pipes, then exits 4. The relay waits a bounded time (5 s) for the pipes,
        # never for the children, and keeps the exit code.
        script = ('(while :; do echo child; sleep 0.05; done) & '
                  f'(exec -a {marker}-holder sleep 300) & '
                  'echo parent; exit 4')
        started = time.monotonic()
        r = self.srun(*self.step_args, "-n2", "/bin/bash", "-c", script, marker, check=False, text=False,
                      timeout=120)
        took = time.monotonic() - started
        self.assertEqual(r.returncode, 4, r.stderr[-2000:])
        self.assertLess(took, 30, "the step waited for the children")
        for rank in range(2):
            self.assertIn(b"parent\n", strip(r.stdout, self.tag(rank)), f"rank {rank}")
        self.assert_whole_lines(r.stdout, range(2))
        # The writer dies of SIGPIPE once its reader is gone. The silent holder was
        # reparented to init, which takes it out of proctrack/linuxproc's reach: it
        # outlives the step with or without gpudiag (without the relay, the same step
        # also waits 60 s for its pipes). proctrack/cgroup kills it; here the test does.
        def writers():
            return [p for p in processes_with(marker) if b"-holder" not in cmdline(p)]
        try:
            self.wait_until(lambda: not writers(), "the children that write to end", timeout=30)
        finally:
            for pid in processes_with(marker + "-holder"):
                os.kill(pid, signal.SIGKILL)
        self.assert_clean_end(marker)


class RelayStressPerTask(RelayStress):
    """The relay process per task, which the hang watchdog needs: the cases where it
    differs from the thread (its memory, its own reading of a gone srun, the drain limit
    and SIGTERM reaching it first)."""
    step_args = ("--diag=hang=600s",)
    relays_per_node = 2
    test_scancel_during_heavy_output = None
    test_binary_and_nul_bytes_pass_exactly = None


if __name__ == "__main__":
    unittest.main(verbosity=2)
