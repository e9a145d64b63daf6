"""The [host:rank] output relay of gpudiag.so in a real srun/slurmstepd: tags, separate
streams, exit codes and signals, byte-exact output under load, when there is no
prefix, and a step run as another user."""
import os
import pwd
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from tagged import strip, tag_of, untag  # noqa: E402

BOTH_STREAMS = r'''
import os, sys
r = os.environ["SLURM_PROCID"]
for i in range(3):
    print(f"out {r} {i}", flush=True)
    print(f"err {r} {i}", file=sys.stderr, flush=True)
sys.exit(3 if r == "2" else 0)
'''

# 1,000,000 numbered lines per task, then a 1 MiB line with no final newline.
FLOOD = r'''
import os, sys
r = os.environ["SLURM_PROCID"].encode()
out = sys.stdout.buffer
for start in range(0, 1000000, 100000):
    out.write(b"".join(b"%s:%d\n" % (r, i) for i in range(start, start + 100000)))
out.write(r * 1048576)
'''


def flood_expected(rank):
    r = str(rank).encode()
    return b"".join(b"%s:%d\n" % (r, i) for i in range(1000000)) + r * 1048576


class Relay(PluginClusterTest):
    def tag(self, rank):
        return f"[{self.cluster.node}:{rank}]"

    def srun_lines(self, stream):
        return [l for l in stream.splitlines() if not l.startswith("srun:")]

    def test_every_line_tagged_streams_apart_and_exit_code_kept(self):
        r = self.srun("-N1", "-n4", PYTHON, "-c", BOTH_STREAMS, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("task 2: Exited with exit code 3", r.stderr)
        out, err = self.srun_lines(r.stdout), self.srun_lines(r.stderr)
        self.assertEqual(len(out), 12)
        self.assertEqual(len(err), 12)
        for stream, word in ((out, "out"), (err, "err")):
            for line in stream:
                body = untag(line)
                self.assertTrue(body.startswith(word + " "), line)
                self.assertEqual(tag_of(line), self.tag(body.split()[1]), line)
                self.assertEqual(line[len(self.tag(0))], " ")

    def test_death_by_signal_is_reported_as_that_signal(self):
        for sig, rc, words in (("KILL", 137, "Killed"), ("SEGV", 139, "Segmentation fault")):
            r = self.srun("-n2", "/bin/sh", "-c", f'echo hi; [ "$SLURM_PROCID" = 1 ] && kill -{sig} $$; exit 0',
                          check=False)
            self.assertEqual(r.returncode, rc, r.stderr)
            self.assertIn(f"task 1: {words}", r.stderr)
            self.assertIn(self.tag(0) + " hi", r.stdout)

    def test_no_byte_lost(self):
        r = self.srun("-n4", PYTHON, "-c", FLOOD, text=False, timeout=600)
        for rank in range(4):
            got = strip(r.stdout, self.tag(rank).encode())
            self.assertEqual(len(got), len(flood_expected(rank)), f"rank {rank}")
            self.assertTrue(got == flood_expected(rank), f"rank {rank}: bytes differ")
        # Each line fits one slurmstepd message, so no tag was ever separated from its line.
        self.assertLessEqual(max(len(l) for l in r.stdout.split(b"\n")), 1023)

    def test_no_prefix_where_it_does_not_belong(self):
        node = self.cluster.node
        # srun --label tags lines itself.
        self.assertEqual(sorted(self.srun("-n2", "--label", "echo", "x").stdout.splitlines()), ["0: x", "1: x"])
        # --diag=noprefix, and the site's default of no prefix for one task.
        self.assertEqual(self.srun("-n2", "--diag=noprefix", "echo", "x").stdout, "x\nx\n")
        self.assertEqual(self.srun("-n1", "echo", "x").stdout, "x\n")
        self.assertEqual(self.srun("-n1", "--diag=prefix", "echo", "x").stdout, f"[{node}:0] x\n")
        # Per-task output files.
        pattern = os.path.join(self.tmp, "task.%t.out")
        self.srun("-n2", "-o", pattern, "echo", "x")
        for t in (0, 1):
            with open(pattern.replace("%t", str(t))) as f:
                self.assertEqual(f.read(), "x\n")

    def test_unbuffered_srun_keeps_the_terminal_on_stdout_and_tags_stderr(self):
        # With srun -u Slurm makes each task's stdout a pseudo-terminal (README "no prefix"):
        # gpudiag leaves a terminal as it is, so the program still sees one, and stderr, a
        # pipe as always, is tagged.
        # A terminal's bytes reach srun as the pty hands them over, so the two tasks' untagged
        # stdout may interleave anywhere (CI saw "True True False\nFalse"): compare characters.
        probe = "import os, sys; print(os.isatty(1)); print('e', os.isatty(2), file=sys.stderr)"
        r = self.srun("-n2", "-u", PYTHON, "-c", probe)
        self.assertEqual(sorted(r.stdout.replace("\r", "").replace("\n", "")), sorted("TrueTrue"), r.stdout)
        self.assertEqual(sorted(self.srun_lines(r.stderr)),
                         [self.tag(0) + " e False", self.tag(1) + " e False"], r.stderr)

    def test_batch_step_untagged_and_its_sruns_tagged(self):
        script = os.path.join(self.tmp, "tagjob.sh")
        out = os.path.join(self.tmp, "tagjob.out")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho from-batch\nsrun -n2 echo from-step\n")
        self.cluster.run(["sbatch", "-n2", "--wait", "-o", out, script], cwd=self.tmp, timeout=120)
        with open(out) as f:
            lines = sorted(f.read().splitlines())
        self.assertEqual(lines, sorted(["from-batch", self.tag(0) + " from-step", self.tag(1) + " from-step"]))

    def test_step_as_another_user(self):
        """The relay process of a watched step runs as the user; without the watchdog the
        program is slurmstepd's own child (the relay is a thread there, node_relay.h), as
        without gpudiag. Nothing gpudiag makes belongs to root."""
        nobody = pwd.getpwnam("nobody")
        work = os.path.join(self.tmp, "shared")
        os.makedirs(work, exist_ok=True)
        os.chmod(work, 0o1777)
        probe = ("import os; p = os.getppid(); "
                 "uid = [l.split()[1] for l in open(f'/proc/{p}/status') if l.startswith('Uid:')][0]; "
                 "gp = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1]; "
                 "print(os.getuid(), uid, open(f'/proc/{gp}/comm').read().strip(), os.environ['GPUDIAG_DIAG_DIR'])")
        # The relay process's parent is slurmstepd; slurmstepd's is not.
        for diag, parent_uid, relayed in (("--diag=hang=600s", nobody.pw_uid, True), ("--diag", 0, False)):
            r = self.srun_as("nobody", "-n2", diag, PYTHON, "-c", probe, cwd=work)
            lines = [untag(l).split() for l in r.stdout.splitlines()]
            self.assertEqual(len(lines), 2, r.stdout)
            for task_uid, relay_uid, above, diag_dir in lines:
                self.assertEqual(int(task_uid), nobody.pw_uid)
                self.assertEqual(int(relay_uid), parent_uid, f"{diag}: the program's parent")
                self.assertEqual(above == "slurmstepd", relayed, f"{diag}: the program's grandparent is {above}")
                self.assertEqual(os.stat(diag_dir).st_uid, nobody.pw_uid, "the diag dir is the user's")
        for root, dirs, files in os.walk(work):
            for name in dirs + files:
                self.assertNotEqual(os.lstat(os.path.join(root, name)).st_uid, 0, f"root created {name}")

if __name__ == "__main__":
    unittest.main(verbosity=2)
