"""Security review of gpudiag as tests (issue 9). gpudiag.so runs inside srun and, as
root, inside slurmstepd on every node; gpudiag-health runs as root from Slurm's hooks.

- gpudiag.so exports only what Slurm looks up;
- no shell anywhere: one place starts programs (util/spawn_child.cpp), argv only, and shell syntax in user strings
  stays data;
- files on a user's behalf are made by the user's processes: --diag=dir=/etc/x fails
  as that user, clearly;
- a config the plugin cannot read fails srun clearly and the daemons stay up;
- control bytes reach neither a task's environment nor Slurm;
- gpudiag-health as a user says UNKNOWN where it needs root, never a false OK, and
  cannot drain."""
import glob
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import BUILD, PLUGIN, PYTHON, SOURCE, PluginClusterTest  # noqa: E402
from slurm_cluster import slurm_version  # noqa: E402
from tagged import strip  # noqa: E402

HEALTH = os.path.join(BUILD, "healthcheck", "gpudiag-health")
FIXTURES = os.path.join(BUILD, "fixtures")
NOBODY = pwd.getpwnam("nobody")


class Exports(unittest.TestCase):
    def test_only_slurm_entry_points_are_exported(self):
        out = subprocess.run(["nm", "-D", "--defined-only", PLUGIN], capture_output=True, text=True, check=True).stdout
        names = [line.split()[-1] for line in out.splitlines() if line.strip()]
        self.assertIn("slurm_spank_init", names)
        for name in names:
            self.assertRegex(name, r"^(slurm_spank_\w+|plugin_(name|type|version))$", "an export Slurm does not need")


class NoShell(unittest.TestCase):
    SOURCES = ["spank", "healthcheck", "nodeinfo", "util", "config", "nccllog", "stacks", "cli", "probe", "fabric"]

    def test_only_argv_exec_sites(self):
        shells = re.compile(r'\b(system|popen|execl|execlp|execle)\s*\(|"/bin/(ba)?sh"|"-c"')
        execs = re.compile(r"\b(execv|execvp|execve|execvpe|posix_spawnp?|fork)\s*\(")
        sites = []
        for d in self.SOURCES:
            for path in glob.glob(os.path.join(SOURCE, d, "**", "*.[ch]*"), recursive=True):
                with open(path, encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        code = line.split("//")[0]
                        self.assertIsNone(shells.search(code), f"{path}:{n}: a shell: {line.strip()}")
                        if execs.search(code):
                            sites.append(f"{os.path.relpath(path, SOURCE)}:{execs.search(code).group(1)}")
        # spawn_child is the one place that starts a program (issue 30): run_command
        # (scontrol, the GPU probe, stack tools) and `gpudiag stacks` (srun --overlap, as
        # the job's owner when root asks) both go through it, argv vectors only, each child
        # in a session of its own with nothing of ours; the relay and its SIGURG listener
        # fork without exec, and so does a file write bounded by a deadline (deadline_child).
        # Subfolders (rooms) are scanned too.
        self.assertEqual(sorted(set(sites)), ["spank/relay/output_relay.cpp:fork", "spank/watchdog/hang_spread.cpp:fork",
                                              "util/deadline_child.cpp:fork", "util/spawn_child.cpp:execve", "util/spawn_child.cpp:fork",
                                              "util/spawn_child.cpp:posix_spawn"])


class AsUser(PluginClusterTest):
    def as_nobody(self, argv, **kw):
        """Runs argv as nobody, srun included: the plugin's srun side then runs as a user."""
        return self.cluster.run(["runuser", "-u", "nobody", "--", *argv], check=False, cwd=self.tmp, **kw)

    def daemons_up(self):
        self.assertTrue(all(p.poll() is None for _, p in self.cluster.procs), "a daemon died")

    def test_diag_dir_in_a_root_only_place_fails_as_the_user(self):
        target = "/etc/gpudiag-security-test"
        shutil.rmtree(target, ignore_errors=True)
        cases = [
            # srun runs as the user: it refuses the dir itself, before any launch.
            (["srun", "-n1", f"--diag=dir={target}", "true"],
             f"gpudiag: --diag: cannot create the diag dir {target}: you cannot write to its parent: ")]
        if slurm_version() < (24, 11):
            # srun as root, tasks as nobody: the dir is made on the task's side. (24.11
            # has no srun --uid; there the task-side refusal is covered by the hostile
            # tests, where the dir belongs to another user.)
            cases.append((["srun", f"--uid={NOBODY.pw_uid}", f"--gid={NOBODY.pw_gid}", "-n1", f"--diag=dir={target}",
                           "true"], f"gpudiag: cannot create the diag dir {target}: Permission denied: "))
        for argv, why in cases:
            # The case before may leave its job completing. A job that has to queue gets its
            # allocation later, in a message that root's `srun --uid` cannot decode (22.05:
            # "Munge decode failed: Unauthorized credential for client UID=0", seen once in
            # CI), and the step then fails for that, not for the diag dir.
            self.cluster.wait_for(lambda: self.cluster.node_state().startswith("IDLE"), "the node to be idle")
            r = self.as_nobody(argv) if "--uid" not in argv[1] else self.cluster.run(argv, check=False, cwd=self.tmp)
            self.assertNotEqual(r.returncode, 0, argv)
            self.assertIn(why + "pick a writable one with --diag=dir=PATH", r.stderr)
            self.assertFalse(os.path.exists(target), "root created the user's diag dir")
        self.daemons_up()

    def test_shell_syntax_in_user_strings_is_data(self):
        # A submit dir (the default diag dir's parent) and a --diag dir full of shell
        # syntax. Were either passed to a shell, a PWNED file would appear.
        weird = os.path.join(self.tmp, "q;touch PWNED1;$(touch PWNED2)`touch PWNED3`'\"")
        os.makedirs(weird)
        os.chmod(weird, 0o1777)
        self.cluster.run(["srun", "-n2", "--diag", "true"], cwd=weird)
        dirs = glob.glob(os.path.join(glob.escape(weird), "gpudiag-*"))
        self.assertEqual(len(dirs), 1, os.listdir(weird))
        named = os.path.join(self.tmp, "d;touch PWNED4;$(touch PWNED5)|x")
        self.cluster.run(["srun", "-n2", f"--diag=dir={named}", "true"], cwd=self.tmp)
        self.assertTrue(os.path.isdir(named))
        for root, dirs_, files in os.walk(self.tmp):
            self.assertFalse([n for n in dirs_ + files if n.startswith("PWNED")], f"a shell ran in {root}")
        self.assertFalse(glob.glob("/PWNED*") + glob.glob(os.path.expanduser("~/PWNED*")))

    def test_unreadable_config_fails_srun_clearly_and_daemons_stay_up(self):
        os.chmod(self.config, 0o600)  # root's; srun as nobody cannot read it
        try:
            r = self.as_nobody(["srun", "-n1", "true"], timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"gpudiag: cannot read config {self.config}: Permission denied (srun reads it as the user: "
                          "make it readable by all users)", r.stderr)
        finally:
            os.chmod(self.config, 0o644)
        self.daemons_up()
        r = self.as_nobody(["srun", "-n1", "echo", "fine"], timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, "fine\n"), r.stderr)

    def test_control_bytes_reach_neither_the_environment_nor_slurm(self):
        # From the user: refused before launch, with the reason.
        r = self.cluster.run(["srun", "-n1", "--diag=dir=/tmp/a\nb", "true"], check=False, cwd=self.tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("gpudiag: --diag: the list holds control characters", r.stderr)
        # From the site's config: the config is refused, naming the key.
        with open(self.config) as f:
            good = f.read()
        try:
            hostile = good.replace('NCCL_SOCKET_IFNAME: "^docker,lo,virbr"', 'NCCL_SOCKET_IFNAME: "ib0\\u001b[2J"')
            self.assertNotEqual(hostile, good)
            with open(self.config, "w") as f:
                f.write(hostile)
            r = self.cluster.run(["srun", "-n1", "true"], check=False, cwd=self.tmp, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("holds control characters", r.stderr)
        finally:
            with open(self.config, "w") as f:
                f.write(good)
        self.daemons_up()
        # Every value the plugin set in a real step is one printable line.
        dump = "import json, os; print(json.dumps(dict(os.environ)))"
        r = self.cluster.run(["srun", "-n2", "--diag", PYTHON, "-c", dump], cwd=self.tmp, text=False)
        envs = [json.loads(strip(r.stdout, f"[{self.cluster.node}:{rank}]".encode())) for rank in range(2)]
        self.assertEqual(len(envs), 2, r.stdout)
        for env in envs:
            injected = [entry.split(":")[0] for entry in env["GPUDIAG_INJECTED"].split(",")]
            self.assertIn("NCCL_DEBUG_FILE", injected)
            for name in injected:
                self.assertTrue(all(0x20 <= ord(c) < 0x7f for c in env[name]), f"{name}={env[name]!r}")

    def test_health_as_a_user_is_unknown_not_ok_and_cannot_drain(self):
        # The kernel shows a user only the first 64 bytes of PCI config space; a copy of
        # the healthy fixture whose config files are root's makes the same point.
        tree = os.path.join(self.tmp, "root-only")
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(os.path.join(FIXTURES, "healthy"), tree, symlinks=True)
        for path in glob.glob(os.path.join(tree, "sys", "devices", "**", "config"), recursive=True):
            if os.path.isfile(path) and not os.path.islink(path):
                os.chmod(path, 0o600)
        config = os.path.join(SOURCE, "etc", "gpudiag.yaml")
        args = [HEALTH, "--fs-root", tree, "--config", config, "--checks", "ib,acs,iommu,gpu", "--format", "json"]
        as_root = subprocess.run(args, capture_output=True, text=True)
        self.assertEqual(as_root.returncode, 0, as_root.stdout + as_root.stderr)
        r = self.as_nobody(args)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        report = json.loads(r.stdout)
        acs = next(c for c in report["checks"] if c["name"] == "acs")
        self.assertEqual(acs["status"], "unknown")
        self.assertIn("ACS unknown for", acs["summary"])
        # --drain as a user: scontrol refuses; gpudiag-health says so and claims nothing.
        sick = [HEALTH, "--fs-root", os.path.join(FIXTURES, "port-down"), "--config", config,
                "--node", self.cluster.node, "--drain"]
        r = self.as_nobody(sick, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("gpudiag", r.stderr)
        self.assertNotIn("DRAIN", self.cluster.node_state())


if __name__ == "__main__":
    unittest.main(verbosity=2)
