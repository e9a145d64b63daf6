"""The node's relay thread (node_relay.h) against its promises, on the real test Slurm
as real throwaway users: it loses no byte that the same step without gpudiag delivers
(a program that exits while srun reads nothing, a child that outlives its task while
another task runs), no fd of it reaches the program, the user's own code before the exec
and another user cannot reach its socket or the victim's pipes, and a node with many
tasks ends its step cleanly. Each case is compared with --diag=noprefix, the same
step without the relay."""
import ctypes
import glob
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, TwoUsersClusterTest  # noqa: E402
from tagged import strip  # noqa: E402

# Numbered 100-byte lines into a non-blocking stdout until the pipe stays full for a
# second (everything downstream is full too), then the count into argv[1] and exit:
# every line it wrote is in the pipe or beyond, so srun must print them all however
# late it reads.
FILL_AND_EXIT = r'''
import fcntl, os, sys, time
fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)
n = full = 0
while n < 10**7 and full < 10:
    try:
        os.write(1, b"%099d\n" % n)
        n += 1
        full = 0
    except BlockingIOError:
        full += 1
        time.sleep(0.1)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(n))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
'''

# What the program holds: fd number and the kind of file, without the inode numbers.
FDS = ("import os\n"
       "for fd in sorted(int(x) for x in os.listdir('/proc/self/fd')):\n"
       "    try:\n"
       "        t = os.readlink(f'/proc/self/fd/{fd}')\n"
       "    except OSError:\n"
       "        continue  # listdir's own, closed by now\n"
       "    print(fd, t.split(':')[0] if ':[' in t else t)\n")

# Run as a user: every way to another process's fds that needs no root. The pid is
# argv[1]; prints one word per way: "denied" or what it got.
STEAL = r'''
import ctypes, os, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
out = []
try:
    out.append("list:" + ",".join(os.listdir(f"/proc/{pid}/fd")))
except OSError:
    out.append("list:denied")
got = []
try:
    pidfd = os.pidfd_open(pid)
    for fd in range(64):
        r = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
        if r >= 0:
            got.append(str(fd))
    out.append("getfd:" + (",".join(got) or "denied"))
except OSError:
    out.append("getfd:denied")
for fd in (1, 2):
    try:
        os.close(os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK))
        out.append(f"open{fd}:opened")
    except OSError:
        out.append(f"open{fd}:denied")
print(" ".join(out))
'''


# Whether the program's parent and grandparent are slurmstepd processes.
PARENTS = r'''
import os
def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
def stepd(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().startswith(b"slurmstepd")
parent = ppid(os.getpid())
print("parent", "slurmstepd" if stepd(parent) else "not", "grandparent", "slurmstepd" if stepd(ppid(parent)) else "not")
'''


# Issue 30.3, as a hostile user's step: each task enlarges its stdout pipe to 1 MiB,
# says so (argv[1]/ready.RANK holds its pid), waits for argv[1]/go (the user has
# stopped their own srun by then), fills the pipe with bare newlines (each becomes a
# tagged line, ~15 times its size), writes how many into argv[1]/done.RANK and exits.
PIPE_FLOOD = r'''
import fcntl, os, sys, time
d, rank = sys.argv[1], os.environ["SLURM_PROCID"]
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)
def put(name, text):
    with open(os.path.join(d, name + ".tmp"), "w") as f:
        f.write(text)
    os.rename(os.path.join(d, name + ".tmp"), os.path.join(d, name))
put("ready." + rank, str(os.getpid()))
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.02)
n = full = 0
chunk = b"\n" * 65536
while full < 10:
    try:
        n += os.write(1, chunk)
        full = 0
    except BlockingIOError:
        full += 1
        time.sleep(0.05)
put("done." + rank, str(n))
'''


class NodeRelayPromises(TwoUsersClusterTest):
    def tag(self, rank):
        return f"[{self.cluster.node}:{rank}]".encode()

    def as_user(self, user, argv, **kw):
        return user.run(argv, env=self.cluster.env, **kw)

    def wait_for(self, predicate, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        self.fail(f"timed out after {timeout} s waiting for {what}")

    def assert_node_takes_the_next_step(self):
        self.wait_for(lambda: not self.cluster.run(["squeue", "-h"]).stdout.strip(), "the queue to empty")
        self.assertTrue(self.cluster.node_state().startswith("IDLE"), self.cluster.node_state())
        self.assertTrue(all(p.poll() is None for _, p in self.cluster.procs), "a daemon died")

    def test_no_byte_lost_when_the_program_exits_while_srun_reads_nothing(self):
        """The program fills every buffer down to its own pipe and exits; srun reads only
        a second later. The thread, held back by bytes it could not write, once took the
        silence for a quiet pipe and dropped what the program had left in it."""
        for diag in ("--diag=prefix", "--diag=noprefix"):
            count = os.path.join(self.tmp, "count" + diag.replace("=", "-"))
            p = subprocess.Popen(["srun", "-n1", diag, PYTHON, "-c", FILL_AND_EXIT, count], env=self.cluster.env,
                                 cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                self.wait_for(lambda: os.path.exists(count), "the program to fill its pipe and exit")
                time.sleep(1)  # far past the thread's quiet limit (0.2 s)
                out, err = p.communicate(timeout=120)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
            with open(count) as f:
                wrote = int(f.read())
            got = strip(out, self.tag(0)) if diag == "--diag=prefix" else out
            want = b"".join(b"%099d\n" % i for i in range(wrote))
            self.assertEqual(p.returncode, 0, err[-2000:])
            self.assertEqual(len(got), len(want), f"{diag}: the program wrote {wrote} lines")
            self.assertTrue(got == want, f"{diag}: bytes differ")

    def pipe_flood(self, diag, tasks=8):
        """PIPE_FLOOD as the victim, whose srun the victim stops: slurmstepd's VmRSS (kB)
        before the flood and its peak while srun stays stopped, after every task exited."""
        d = os.path.join(self.victim.home, "flood" + diag.replace("=", "-"))
        self.victim.run(["mkdir", d], check=True)
        p = self.victim.popen(["srun", f"-n{tasks}", "--overcommit", diag, PYTHON, "-c", PIPE_FLOOD, d],
                              env=self.cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        srun = []
        try:
            def files(prefix):
                return [f for f in os.listdir(d) if f.startswith(prefix + ".") and not f.endswith(".tmp")]
            self.wait_for(lambda: len(files("ready")) == tasks, "every task to enlarge its pipe")
            programs = [int(_read(os.path.join(d, f))) for f in files("ready")]
            stepd = {_ppid(pid) for pid in programs}
            self.assertEqual(len(stepd), 1, "the programs are children of one slurmstepd")
            stepd = stepd.pop()
            self.assertIn(b"slurmstepd", _cmdline(stepd))
            srun = [int(x) for x in os.listdir("/proc") if x.isdigit() and _cmdline(x).startswith(b"srun\0")
                    and os.stat(f"/proc/{x}").st_uid == self.victim.uid]
            self.assertTrue(srun)
            # What Ctrl-Z does to srun (and to its helper process, where it has one).
            self.victim.run(["kill", "-STOP", *map(str, srun)], check=True)
            self.wait_for(lambda: all(_state(pid) == "T" for pid in srun), "srun to stop")
            before = _rss_kb(stepd)
            with open(os.path.join(d, "go"), "w"):
                pass
            self.wait_for(lambda: len(files("done")) == tasks, "every task to fill its pipe and exit")
            # The thread drains the pipes from 0.2 s after slurmstepd reaped the last task.
            # slurmstepd may not reap it for a while: it tells the stopped srun of each exit
            # before it waits for the next. Even before the drain, the thread once held a
            # 64 KiB read of each pipe tagged (5 MB here), which the bound below refuses too.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in programs):
                time.sleep(0.05)
            peak, deadline = 0, time.monotonic() + 1.5
            while time.monotonic() < deadline:
                peak = max(peak, _rss_kb(stepd))
                time.sleep(0.05)
            return before, peak
        finally:
            # Delivering 8 MiB of bare newlines takes srun minutes, with or without gpudiag
            # (what arrives is the promise of the test above): the user ends srun instead.
            if srun:
                self.victim.run(["kill", "-KILL", *map(str, srun)])
            os.kill(p.pid, signal.SIGCONT)  # runuser stopped itself with its child, as su does
            self.cluster.run(["scancel", "-u", self.victim.name], check=False)
            p.wait(timeout=60)

    def test_a_stopped_srun_cannot_make_slurmstepd_hold_a_flood_of_tagged_lines(self):
        """Issue 30.3: 8 tasks with 1 MiB pipes full of bare newlines, srun stopped by its
        user, every task exited. The thread once read each pipe whole at the drain and
        tagged it: root's slurmstepd grew by 85 to 145 MB for as long as srun stayed
        stopped. It may now grow by Slurm's own buffering (the same step without the
        relay) and the step's budget (kRelayStepBudget, 1 MiB; docs/SECURITY.md), with
        1 MiB to spare for the allocator's own rounding."""
        plain_before, plain_peak = self.pipe_flood("--diag=noprefix")
        before, peak = self.pipe_flood("--diag=prefix")
        slurms_own = max(0, plain_peak - plain_before)
        grown = peak - before
        print(f"slurmstepd VmRSS under the flood: {before} to {peak} kB; without the relay {plain_before} to {plain_peak} kB", file=sys.stderr)
        self.assertLessEqual(grown, slurms_own + 2 * 1024,
                             f"slurmstepd grew by {grown} kB ({before} to {peak} kB) under the flood; "
                             f"without the relay by {slurms_own} kB")
        self.assert_node_takes_the_next_step()

    def test_a_child_of_an_ended_task_is_relayed_while_another_task_runs(self):
        """Without gpudiag slurmstepd relays task 0's pipe while task 1 runs, so a child
        that task 0 left behind is heard until the step ends; the thread once cut it off
        0.2 s after task 0 exited (and the child died of SIGPIPE)."""
        prog = ('if [ "$SLURM_PROCID" = 0 ]; then (for i in 1 2 3 4; do echo tick $i; sleep 0.4; done) & exit 0; '
                'else sleep 2.5; echo done; fi')
        want = [b"tick 1\n", b"tick 2\n", b"tick 3\n", b"tick 4\n"]
        plain = self.srun("-n2", "--diag=noprefix", "/bin/sh", "-c", prog, text=False)
        self.assertEqual(sorted(plain.stdout.splitlines(keepends=True)), sorted(want + [b"done\n"]))
        r = self.srun("-n2", "--diag=prefix", "/bin/sh", "-c", prog, text=False)
        self.assertEqual(strip(r.stdout, self.tag(0)), b"".join(want))
        self.assertEqual(strip(r.stdout, self.tag(1)), b"done\n")

    def test_every_task_is_relayed_by_the_node_thread(self):
        """The thread starts in task_post_fork, after slurmstepd forked every task and before
        any may run: each task still hands its streams to it, so the program is slurmstepd's
        own child (a task that relays itself is a copy of slurmstepd between them) and no
        task says that it relays itself."""
        r = self.srun("-n4", "--diag=prefix", PYTHON, "-c", PARENTS, text=False)
        for rank in range(4):
            self.assertEqual(strip(r.stdout, self.tag(rank)), b"parent slurmstepd grandparent not\n",
                             f"rank {rank}: {r.stdout!r}")
        self.assertNotIn(b"relays its own output", r.stderr)

    def test_no_fd_of_the_relay_reaches_the_program(self):
        plain = self.srun("-n2", "--diag=noprefix", PYTHON, "-c", FDS, text=False).stdout
        tagged = self.srun("-n2", "--diag=prefix", PYTHON, "-c", FDS, text=False).stdout
        # Each task's fds under the relay are those of a task without it. Untagged, the two
        # tasks' lines interleave as srun gets them (CI once saw 0, 0, 1, 1, 2, 2), so the
        # plain run is compared as a multiset of lines.
        mine = strip(tagged, self.tag(0))
        self.assertEqual(strip(tagged, self.tag(1)), mine)
        self.assertEqual(sorted(plain.splitlines(keepends=True)), sorted(mine.splitlines(keepends=True) * 2),
                         f"without the relay: {plain!r}; under it, each task: {mine!r}")

    def test_the_users_own_code_before_the_exec_cannot_reach_the_relay_socket(self):
        """A --task-prolog runs as the user while its parent, the task before its exec,
        still holds the thread's socket (close-on-exec keeps it from the program only). A
        user who got it could hand the root thread any fds to write into; the task is not
        dumpable, so the kernel refuses every way to its fds."""
        prolog = os.path.join(self.victim.home, "prolog.sh")
        # One file per task: two prologs appending to one file interleave their lines
        # (print writes the text and the newline apart; CI saw them run together).
        result = os.path.join(self.victim.home, "stolen")
        with open(prolog, "w") as f:
            f.write(f"#!/bin/sh\n{PYTHON} -c '{STEAL}' $PPID > {result}.$$.txt\n")
        os.chmod(prolog, 0o755)
        os.chown(prolog, self.victim.uid, self.victim.gid)
        r = self.as_user(self.victim, ["srun", "-n2", "--diag=prefix", f"--task-prolog={prolog}", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = []
        for name in sorted(glob.glob(result + ".*.txt")):
            with open(name) as f:
                lines += f.read().splitlines()
        self.assertEqual(lines, ["list:denied getfd:denied open1:denied open2:denied"] * 2)

    def test_another_user_reaches_neither_the_relay_nor_the_victims_pipes(self):
        marker = f"gpudiag-victim-{os.getpid()}"
        p = self.victim.popen(["srun", "-n2", "--diag=prefix", "/bin/bash", "-c", f"echo up; exec -a {marker} sleep 30"],
                              env=self.cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            def programs():
                return [int(d) for d in os.listdir("/proc") if d.isdigit() and _cmdline(d).startswith(marker.encode())]
            self.wait_for(lambda: len(programs()) == 2, "the victim's programs")
            targets = programs() + [_ppid(pid) for pid in programs()[:1]]  # the programs and slurmstepd
            self.assertIn(b"slurmstepd", _cmdline(targets[-1]))
            for pid in targets:
                r = self.as_user(self.attacker, [PYTHON, "-c", STEAL, str(pid)])
                self.assertEqual(r.stdout.strip(), "list:denied getfd:denied open1:denied open2:denied",
                                 f"pid {pid} ({_cmdline(pid)[:40]!r}): {r.stderr}")
        finally:
            t0 = time.monotonic()
            self.cluster.run(["scancel", "-u", self.victim.name], check=False)
            p.communicate(timeout=60)
        self.assert_node_takes_the_next_step()

    def test_many_tasks_on_one_node(self):
        """96 tasks hand their streams to one thread at once: every line tagged, the
        exit status kept, the step ends and the node takes the next one."""
        n = 96
        r = self.srun("-n", str(n), "--overcommit", "--diag=prefix", "/bin/sh", "-c",
                      'echo "out $SLURM_PROCID"; echo "err $SLURM_PROCID" >&2; [ "$SLURM_PROCID" != 77 ] || exit 9',
                      check=False, text=False, timeout=300)
        self.assertEqual(r.returncode, 9, r.stderr[-2000:])
        for rank in range(n):
            self.assertEqual(strip(r.stdout, self.tag(rank)), b"out %d\n" % rank, f"rank {rank}")
            self.assertEqual(strip(r.stderr, self.tag(rank)), b"err %d\n" % rank, f"rank {rank}")
        self.assert_node_takes_the_next_step()


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _read(path):
    with open(path) as f:
        return f.read()


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
