"""The node's relay thread (node_relay.h) against its promises, on the real test Slurm
as real throwaway users: it loses no byte that the same step without gpudiag delivers
(a program that exits while srun reads nothing, a child that outlives its task while
another task runs), no fd of it reaches the program, the user's own code before the exec
and another user cannot reach its socket or the victim's pipes, and a node with many
tasks ends its step cleanly. Each case is compared with --diag=noprefix, the same
step without the relay."""
import ctypes
import os
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

    def test_no_fd_of_the_relay_reaches_the_program(self):
        plain = self.srun("-n2", "--diag=noprefix", PYTHON, "-c", FDS, text=False).stdout
        tagged = self.srun("-n2", "--diag=prefix", PYTHON, "-c", FDS, text=False).stdout
        for rank in range(2):
            self.assertEqual(strip(tagged, self.tag(rank)), plain[:len(plain) // 2], f"rank {rank}")
        self.assertEqual(plain[:len(plain) // 2], plain[len(plain) // 2:])

    def test_the_users_own_code_before_the_exec_cannot_reach_the_relay_socket(self):
        """A --task-prolog runs as the user while its parent, the task before its exec,
        still holds the thread's socket (close-on-exec keeps it from the program only). A
        user who got it could hand the root thread any fds to write into; the task is not
        dumpable, so the kernel refuses every way to its fds."""
        prolog = os.path.join(self.victim.home, "prolog.sh")
        result = os.path.join(self.victim.home, "stolen.txt")
        with open(prolog, "w") as f:
            f.write(f"#!/bin/sh\n{PYTHON} -c '{STEAL}' $PPID >> {result}\n")
        os.chmod(prolog, 0o755)
        os.chown(prolog, self.victim.uid, self.victim.gid)
        r = self.as_user(self.victim, ["srun", "-n2", "--diag=prefix", f"--task-prolog={prolog}", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(result) as f:
            lines = f.read().splitlines()
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


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
