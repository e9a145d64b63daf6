"""gpudiag.so under a hostile neighbour and a hostile launch (issue 21), as real
throwaway users on the real test Slurm:

- another user's copy of the predictable diag dir (0777, full of symlinks into the
  victim's files) is not used: nothing is written through it, and the step says why;
- a --diag=dir= the user cannot write fails in srun, before anything launches;
- a launch that gpudiag fails on the node (GPUDIAG_DIAG longer than slurmstepd reads,
  a config broken between srun's start and the launch) fails srun, non-zero, with the
  reason on the user's terminal;
- a submit dir with control bytes, and --pty with hang=, say what is off and why;
- srun's step-end summary never reads a diag dir that another user made appear after its
  check (adversary2 B1): the dir is opened once, as the user's private dir."""
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, TwoUsersClusterTest  # noqa: E402

# What NCCL does with NCCL_DEBUG_FILE=DIR/nccl.%h.%p.log, as the task's user: open the
# file for writing, following whatever is there. Also shows where the plugin pointed it.
NCCL_LIKE = ("import os, socket\n"
             "f = os.environ.get('NCCL_DEBUG_FILE')\n"
             "print('NCCL_DEBUG_FILE=' + str(f)); print('GPUDIAG_DIAG_DIR=' + str(os.environ.get('GPUDIAG_DIAG_DIR')))\n"
             "if f:\n"
             "    p = f.replace('%h', socket.gethostname().split('.')[0]).replace('%p', str(os.getpid()))\n"
             "    open(p, 'w').write('NCCL INFO overwritten by the victim\\n')\n")


# adversary2 B1: another user's dir appears at the victim's diag dir path between srun's
# check and its reads. The real race (their branch's test_adversary2_srun_summary_race.py:
# a dir renamed away and back every 0.2 ms) was won in none of 60 steps here, so this
# test decides the race instead: preloaded into the victim's srun, the check's lstat of
# the path finds nothing, as it does when it falls in the attacker's gap. A summary read
# through one fd, opened as the user's private dir, never looks at the path again.
HIDE_FROM_LSTAT = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
static int hidden(const char* p) {
  const char* h = getenv("GPUDIAG_TEST_LSTAT_MISSES");
  return h && p && strcmp(p, h) == 0;
}
int lstat(const char* p, struct stat* st) {
  if (hidden(p)) { errno = ENOENT; return -1; }
  int (*real)(const char*, struct stat*) = dlsym(RTLD_NEXT, "lstat");
  return real(p, st);
}
int lstat64(const char* p, struct stat64* st) {
  if (hidden(p)) { errno = ENOENT; return -1; }
  int (*real)(const char*, struct stat64*) = dlsym(RTLD_NEXT, "lstat64");
  return real(p, st);
}
"""
PLANTED = "9.9.9-ATTACKER-PLANTED"
PLANT = ("import os, sys\n"
         "d = sys.argv[1]\n"
         "os.mkdir(d); os.chmod(d, 0o777)\n"
         "open(os.path.join(d, 'nccl.evil.1.log'), 'w').write(\n"
         f"  'evil:1:1 [0] NCCL INFO NCCL version {PLANTED}\\n'\n"
         "  'evil:1:1 [0] NCCL WARN NET/IB : mlx5_0:1 Got completion with error 12, opcode 1, len 0\\n')\n")


class HostileNeighbour(TwoUsersClusterTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A shared submit dir, as /scratch/shared or /tmp are.
        cls.shared = os.path.join(cls.tmp, "shared")
        os.mkdir(cls.shared)
        os.chmod(cls.shared, 0o1777)

    def as_user(self, user, argv, cwd=None, env=None, timeout=120):
        e = dict(self.cluster.env)
        e.update(env or {})
        return user.run(argv, env=e, cwd=cwd or self.shared, timeout=timeout)

    def last_job_id(self):
        r = self.cluster.run(["srun", "-n1", "printenv", "SLURM_JOB_ID"], cwd=self.tmp)
        return int(r.stdout.strip())

    def test_a_neighbours_copy_of_the_predictable_diag_dir_is_not_used(self):
        precious = os.path.join(self.victim.home, "precious.txt")
        self.victim.run(["sh", "-c", f"echo my thesis > {precious}"], check=True)
        host = self.cluster.node
        # The attacker creates the next jobs' dirs (mode 0777), each full of symlinks
        # nccl.<host>.<pid>.log -> the victim's file, for the pids that come next.
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last_pid = int(f.read())
        first_job = self.last_job_id() + 1
        plant = ("import os, sys\n"
                 "shared, host, precious, first_job, last_pid = sys.argv[1:6]\n"
                 "for job in range(int(first_job), int(first_job) + 3):\n"
                 "    d = os.path.join(shared, f'gpudiag-{job}.0')\n"
                 "    os.mkdir(d); os.chmod(d, 0o777)\n"
                 "    for pid in range(int(last_pid), int(last_pid) + 4000):\n"
                 "        os.symlink(precious, os.path.join(d, f'nccl.{host}.{pid}.log'))\n"
                 "    os.symlink(precious, os.path.join(d, f'hang.{host}.txt'))\n")
        self.as_user(self.attacker, [PYTHON, "-c", plant, self.shared, host, precious, str(first_job), str(last_pid)])
        r = self.as_user(self.victim, ["srun", "-n1", "--diag", PYTHON, "-c", NCCL_LIKE])
        with open(precious) as f:
            self.assertEqual(f.read(), "my thesis\n", "NCCL, as the victim, wrote through the attacker's symlink")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("NCCL_DEBUG_FILE=None", r.stdout)
        self.assertIn("GPUDIAG_DIAG_DIR=None", r.stdout)
        self.assertRegex(r.stderr, r"gpudiag: no NCCL log files and no hang report for this step: the diag dir "
                                   + self.shared + r"/gpudiag-\d+\.0 belongs to another user \(uid \d+\), not to "
                                   r"you \(uid \d+\): pick a directory of your own with --diag=dir=PATH")

    def test_the_diag_dir_the_task_creates_is_private(self):
        r = self.as_user(self.victim, ["srun", "-n2", "--diag", PYTHON, "-c", NCCL_LIKE])
        self.assertEqual(r.returncode, 0, r.stderr)
        dirs = [line.split("=", 1)[1] for line in r.stdout.splitlines() if "GPUDIAG_DIAG_DIR=" in line]
        self.assertEqual(len(set(dirs)), 1, r.stdout)
        st = os.lstat(dirs[0].strip())
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (self.victim.uid, 0o700))

    def test_a_named_dir_the_user_cannot_write_fails_in_srun(self):
        theirs = os.path.join(self.shared, "attackers-dir")
        self.as_user(self.attacker, ["mkdir", "-m", "0755", theirs])
        marker = os.path.join(self.victim.home, "launched")
        for target in (theirs, os.path.join(theirs, "sub")):
            r = self.as_user(self.victim, ["srun", "-n1", f"--diag=dir={target}", "touch", marker])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"gpudiag: --diag: ", r.stderr)
            self.assertIn("pick a writable one with --diag=dir=PATH", r.stderr)
            # srun refused it: no job was allocated, nothing ran.
            self.assertNotIn("srun: job", r.stderr)
            self.assertFalse(os.path.exists(marker))
        # One the victim can write but that is not the victim's: a named dir must be the
        # user's own, so the step fails before the program starts, saying why.
        open_dir = os.path.join(self.shared, "attackers-open-dir")
        self.as_user(self.attacker, ["mkdir", "-m", "0777", open_dir])
        self.as_user(self.attacker, ["chmod", "0777", open_dir])
        r = self.as_user(self.victim, ["srun", "-n1", f"--diag=dir={open_dir}", "touch", marker])
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, rf"gpudiag: the diag dir {open_dir} belongs to another user \(uid \d+\), not to "
                                   r"you \(uid \d+\): pick a directory of your own with --diag=dir=PATH")
        self.assertFalse(os.path.exists(marker))

    def test_gpudiag_diag_longer_than_slurmstepd_reads_fails_in_srun(self):
        marker = os.path.join(self.victim.home, "launched-long")
        long = "dir=/tmp/" + "d" * 9000
        r = self.as_user(self.victim, ["srun", "-n1", "touch", marker], env={"GPUDIAG_DIAG": long})
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("gpudiag: --diag: the list is 9009 bytes long, more than the 8191 that slurmstepd can read on "
                      "the nodes: shorten it (from GPUDIAG_DIAG)", r.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_a_config_broken_between_srun_and_the_launch_fails_srun_with_the_reason(self):
        with open(self.config) as f:
            good = f.read()
        marker = os.path.join(self.victim.home, "launched-broken")
        e = dict(self.cluster.env)
        # Held: srun has read the (good) config and waits; the config breaks; released.
        p = self.victim.popen(["srun", "--hold", "-J", "heldstep", "-n2", "touch", marker], env=e, cwd=self.shared,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            job = None
            for _ in range(100):
                r = self.cluster.run(["squeue", "-h", "-n", "heldstep", "-o", "%i"], check=False)
                if r.stdout.strip():
                    job = r.stdout.strip()
                    break
                time.sleep(0.1)
            self.assertIsNotNone(job, "the held job never showed up")
            with open(self.config, "w") as f:
                f.write(good + "\nplugin_typo: 1\n")
            self.cluster.run(["scontrol", "release", job])
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            with open(self.config, "w") as f:
                f.write(good)
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("unknown key 'plugin_typo'", err)
        self.assertFalse(os.path.exists(marker))
        self.assertTrue(all(q.poll() is None for _, q in self.cluster.procs), "a daemon died")

    def test_a_submit_dir_with_control_bytes_says_why_nccl_logging_is_off(self):
        weird = os.path.join(self.victim.home, "run\x1b[31mred")
        self.victim.run(["mkdir", weird], check=True)
        r = self.as_user(self.victim, ["srun", "-n1", "--diag", PYTHON, "-c", NCCL_LIKE], cwd=weird)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("NCCL_DEBUG_FILE=None", r.stdout)
        self.assertIn("gpudiag: no NCCL log files and no hang report for this step: the diag dir name holds control "
                      "characters (from the submit dir?): pick a directory of your own with --diag=dir=PATH", r.stderr)
        self.assertEqual(os.listdir(weird), [])

    def test_a_project_dir_holds_the_diag_dir_only_where_the_admin_trusts_its_group(self):
        """Issue 30: a group project dir (root:GROUP 2770) is refused as StrictModes would,
        with a message that says how to choose another dir; once the admin lists GROUP in
        plugin.diag_dir_trusted_groups, the step's NCCL logs go there, in a dir of the
        user's own (0700). The victim's own group stands for the project's, so that no
        group cache of Slurm's has to learn a new group."""
        project = os.path.join(self.tmp, "project-2770")
        os.mkdir(project)
        os.chown(project, 0, self.victim.gid)
        os.chmod(project, 0o2770)
        with open(self.config) as f:
            shipped = f.read()
        try:
            r = self.as_user(self.victim, ["srun", "-n1", "--diag", PYTHON, "-c", NCCL_LIKE], cwd=project)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("NCCL_DEBUG_FILE=None", r.stdout)
            self.assertIn(f"lies in {project}, which the members of group {self.victim.name} may write and which is "
                          "not sticky (mode 2770), so another user could replace it: pick a directory of your own "
                          "outside it with --diag=dir=PATH (e.g. --diag=dir=$HOME/gpudiag), or ask your admin to "
                          "trust the group with plugin.diag_dir_trusted_groups", r.stderr)
            with open(self.config, "w") as f:
                f.write(shipped.replace("\nplugin:\n", f"\nplugin:\n  diag_dir_trusted_groups: [{self.victim.name}]\n", 1))
            r = self.as_user(self.victim, ["srun", "-n1", "--diag", PYTHON, "-c", NCCL_LIKE], cwd=project)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("lies in", r.stderr)
            logs = re.search(r"NCCL_DEBUG_FILE=(\S+)/nccl\.%h\.%p\.log", r.stdout)
            self.assertTrue(logs, r.stdout)
            diag = logs.group(1)
            self.assertEqual(os.path.dirname(diag), project)
            st = os.stat(diag)
            self.assertEqual((st.st_uid, st.st_mode & 0o777), (self.victim.uid, 0o700))
            self.assertTrue(any(n.startswith("nccl.") for n in os.listdir(diag)), os.listdir(diag))
        finally:
            with open(self.config, "w") as f:
                f.write(shipped)
            shutil.rmtree(project, ignore_errors=True)

    def test_a_diag_dir_under_a_parent_others_can_rewrite_is_refused(self):
        # Issue 21 A3: in a parent others may write that is not sticky (a group project
        # dir), another user can rename the checked dir away and put their own in its
        # place, and NCCL opens its logs by path. Such a dir is refused before launch.
        project = os.path.join(self.tmp, "project")
        os.mkdir(project)
        os.chmod(project, 0o777)  # 2770 with both users in the group behaves the same
        try:
            r = self.as_user(self.victim, ["srun", "-n1", f"--diag=dir={project}/mine", PYTHON, "-c", NCCL_LIKE])
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertNotIn("NCCL_DEBUG_FILE=", r.stdout)
            self.assertIn(f"gpudiag: the diag dir {project}/mine lies in {project}, which others may write and which "
                          "is not sticky (mode 0777), so another user could replace it: pick a directory of your own "
                          "outside it with --diag=dir=PATH (e.g. --diag=dir=$HOME/gpudiag), or ask your admin to "
                          "trust the group with plugin.diag_dir_trusted_groups", r.stderr)
            # The default dir there is skipped: the step runs without NCCL log files.
            r = self.as_user(self.victim, ["srun", "-n1", "--diag", PYTHON, "-c", NCCL_LIKE], cwd=project)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("NCCL_DEBUG_FILE=None", r.stdout)
            self.assertIn(f"lies in {project}, which others may write and which is not sticky", r.stderr)
            # A dir= whose path leads through a link into the attacker's dir.
            theirs = os.path.join(self.shared, "attackers-open")
            self.as_user(self.attacker, ["mkdir", "-m", "0777", theirs])
            link = os.path.join(self.victim.home, "results")
            self.victim.run(["ln", "-s", theirs, link], check=True)
            r = self.as_user(self.victim, ["srun", "-n1", f"--diag=dir={link}/mydiag", PYTHON, "-c", NCCL_LIKE])
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn(f"lies in {theirs}, which belongs to another user (uid {self.attacker.uid})", r.stderr)
        finally:
            shutil.rmtree(project, ignore_errors=True)

    def test_srun_never_summarizes_a_dir_that_appears_after_its_check(self):
        project = os.path.join(self.tmp, "race-project")
        os.mkdir(project)
        os.chmod(project, 0o777)  # a group project dir: the tasks refuse a diag dir in it
        target = os.path.join(project, "diag")
        shim = os.path.join(self.tmp, "hide_from_lstat.so")
        try:
            src = os.path.join(self.tmp, "hide_from_lstat.c")
            with open(src, "w") as f:
                f.write(HIDE_FROM_LSTAT)
            subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", shim, src, "-ldl"], check=True)
            os.chmod(shim, 0o755)
            self.attacker.run([PYTHON, "-c", PLANT, target], env=dict(self.cluster.env), check=True)
            env = dict(self.cluster.env, LD_PRELOAD=shim, GPUDIAG_TEST_LSTAT_MISSES=target)
            r = self.victim.run(["srun", "-n1", f"--diag=dir={target}", "true"], env=env, cwd=self.victim.home,
                                timeout=60)
            self.assertIn(f"the diag dir {target} belongs to another user", r.stderr)  # the tasks' refusal
            self.assertNotIn(PLANTED, r.stderr, "srun summarized the attacker's NCCL log on the victim's terminal")
            self.assertNotIn("error 12", r.stderr)
            self.assertNotIn("gpudiag: NCCL", r.stderr)
        finally:
            shutil.rmtree(project, ignore_errors=True)
            for leftover in (shim, shim[:-3] + ".c"):
                if os.path.exists(leftover):
                    os.unlink(leftover)

    def test_pty_with_hang_says_the_watchdog_is_off(self):
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen(["srun", "--pty", "-n1", "--diag=hang=30s", "true"], env=self.cluster.env,
                                 cwd=self.tmp, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
            os.close(slave)
            slave = None
            out = b""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1)
                if ready:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError:
                        break
                    if not chunk:
                        break
                    out += chunk
                elif p.poll() is not None:
                    break
            p.wait(timeout=30)
        finally:
            if slave is not None:
                os.close(slave)
            os.close(master)
        text = out.decode(errors="replace")
        self.assertEqual(p.returncode, 0, text)
        self.assertIn("gpudiag: hang=: no hang watchdog for task 0: its output goes to a terminal (srun --pty)", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
