"""Fail fast in a real srun/slurmstepd: the hang watchdog (kill, report, the CPU rule)
with real torch gloo, the node preflight, and fail-fast variables the user overrides."""
import glob
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import BUILD, PYTHON, PluginClusterTest  # noqa: E402
from tagged import untag  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HANG_EXIT = 200
# What README promises: the step ends within DURATION plus this (stack collection,
# SIGTERM); a process that ignores SIGTERM adds hang.kill_grace.
HANG_SLACK = 30


class FailFast(PluginClusterTest):
    def setUp(self):
        with open(self.config) as f:
            self.good_config = f.read()

    def tearDown(self):
        with open(self.config, "w") as f:
            f.write(self.good_config)

    def configure(self, plugin_extra):
        """Adds keys under plugin: (indented two spaces)."""
        text = self.good_config.replace("\nplugin:\n", "\nplugin:\n" + plugin_extra, 1)
        with open(self.config, "w") as f:
            f.write(text)

    def work_dir(self, name):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        return d

    def test_hung_rank_ends_the_step_with_a_report(self):
        work = self.work_dir("hang")
        start = time.monotonic()
        r = self.srun("-n4", "--diag=hang=20s", PYTHON, os.path.join(HERE, "torch_hang.py"), check=False,
                      cwd=work, timeout=180)
        took = time.monotonic() - start
        self.assertEqual(r.returncode, HANG_EXIT, r.stderr)
        self.assertLess(took, 20 + HANG_SLACK)
        self.assertGreaterEqual(took, 20)
        self.assertRegex(r.stderr, r"gpudiag: no output for 20s on \S+; stacks in \S+/hang\.\S+\.txt; ending step")
        reports = glob.glob(os.path.join(work, "gpudiag-*", "hang.*.txt"))
        self.assertEqual(len(reports), 1, os.listdir(work))
        with open(reports[0]) as f:
            report = f.read()
        for rank in range(4):
            self.assertIn(f"== task rank {rank}:", report)
        procs = report.count("\n-- pid ")
        stacks = report.count("  eu-stack:\n") + report.count("  gdb:\n") + report.count("  /proc (threads):\n")
        self.assertGreaterEqual(procs, 4)
        self.assertEqual(procs, stacks, report[:3000])
        self.assertIn("TCPStore", report)  # where ranks 0-2 wait for rank 3

    def test_report_only_lets_the_job_run_on(self):
        work = self.work_dir("report")
        prog = "import time; print('start', flush=True); time.sleep(9); print('done', flush=True)"
        r = self.srun("-n2", "--diag=hang=3s,hang-action=report", PYTHON, "-c", prog, cwd=work, timeout=120)
        self.assertEqual(sorted(untag(l) for l in r.stdout.splitlines()), ["done", "done", "start", "start"])
        self.assertIn("step runs on", r.stderr)
        self.assertEqual(len(glob.glob(os.path.join(work, "gpudiag-*", "hang.*.txt"))), 1)

    def test_busy_is_not_hung_with_the_cpu_rule(self):
        self.configure("  hang:\n    cpu: true\n")
        prog = ("import time\nend = time.time() + 12\nwhile time.time() < end: pass\nprint('computed', flush=True)")
        r = self.srun("-n2", "--diag=hang=4s", PYTHON, "-c", prog, cwd=self.work_dir("busy"), timeout=120)
        self.assertEqual([untag(l) for l in r.stdout.splitlines()], ["computed", "computed"])
        self.assertNotIn("no output for", r.stderr)

    def test_silent_and_idle_is_hung_with_the_cpu_rule(self):
        self.configure("  hang:\n    cpu: true\n")
        r = self.srun("-n1", "--diag=hang=3s", "sleep", "60", cwd=self.work_dir("idle"), check=False, timeout=120)
        self.assertEqual(r.returncode, HANG_EXIT, r.stderr)

    def test_site_default_watchdog_never_fails_a_job_over_its_dir(self):
        # The site turns the watchdog on; the user (nobody) runs from a directory it may
        # not write, so there is no diag dir: the job runs, without a watchdog.
        self.configure("  hang:\n    duration: 10m\n")
        locked = self.work_dir("locked")
        os.chmod(locked, 0o755)
        r = self.srun_as("nobody", "-n1", "echo", "ran", cwd=locked)
        self.assertEqual(r.stdout, "ran\n")
        self.assertEqual(os.listdir(locked), [])
        # Asked for explicitly, the same failure stops the step before launch.
        r = self.srun_as("nobody", "-n1", "--diag", "echo", "ran", cwd=locked, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot create the diag dir", r.stderr)

    def preflight_with(self, fixture, shm_path, shm_min):
        self.configure(f"  preflight:\n    fs_root: {BUILD}/fixtures/{fixture}\n    shm_path: {shm_path}\n"
                       f"    shm_min: {shm_min}\n    memlock: false\n")
        marker = os.path.join(self.tmp, "launched")
        r = self.srun("-n2", "--diag=preflight", "touch", marker, check=False, timeout=60)
        launched = os.path.exists(marker)
        if launched:
            os.unlink(marker)
        return r, launched

    def test_preflight_small_shm_fails_the_step_before_launch(self):
        shm = self.work_dir("shm")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "gpudiag-test-shm", shm], check=True)
        try:
            r, launched = self.preflight_with("healthy", shm, "1G")
        finally:
            subprocess.run(["umount", shm], check=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(launched)
        self.assertIn(f"gpudiag: preflight on {self.cluster.node}: {shm} is 64 MiB, NCCL needs at least 1 GiB", r.stderr)

    def test_preflight_down_port_fails_and_healthy_passes(self):
        r, launched = self.preflight_with("port-down", "/tmp", "1M")
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(launched)
        self.assertIn("mlx5_3 port 1 is DOWN (phys_state Polling): check the cable or switch port", r.stderr)
        r, launched = self.preflight_with("healthy", "/tmp", "1M")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(launched)

    def test_failfast_defaults_and_user_values(self):
        show = ("import os; print(os.environ.get('TORCH_NCCL_ASYNC_ERROR_HANDLING'), "
                "os.environ.get('TORCH_NCCL_DUMP_ON_TIMEOUT'), os.environ.get('TORCH_FR_DUMP_TEMP_FILE'), "
                "os.environ.get('PET_RDZV_CONF'))")
        r = self.srun("-n1", "--diag", PYTHON, "-c", show, cwd=self.work_dir("ff"))
        handling, dump, fr_file, rdzv = r.stdout.split()
        self.assertEqual((handling, dump, rdzv), ("3", "1", "join_timeout=600"))
        self.assertRegex(fr_file, r"/gpudiag-\d+\.\d+/fr_trace\.rank$")
        r = self.srun("-n1", PYTHON, "-c", show, env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
        self.assertEqual(r.stdout.split()[:2], ["1", "1"])

    def test_old_torch_sees_the_failfast_settings(self):
        # torch <= 2.1 reads only the pre-2.2 names (pytorch#114077); Debian's torch is 1.13.
        prog = os.path.join(HERE, "torch_old_names.py")
        r = self.srun("-n1", PYTHON, prog, cwd=self.work_dir("oldnames"))
        seen = json.loads(untag(r.stdout.strip().splitlines()[-1]))
        # Debian 12's torch is 1.13 and reads the old name; Debian 13's (2.6) reads the new
        # one: with both set, each parses the plugin's value.
        self.assertRegex(seen["torch"], r"^\d+\.\d+", seen)
        self.assertEqual((seen["new"], seen["old"], seen["torch_parsed"]), ("3", "3", "3"), seen)
        # A user value under the old name wins for both names.
        r = self.srun("-n1", PYTHON, prog, env={"NCCL_ASYNC_ERROR_HANDLING": "0"}, cwd=self.work_dir("oldnames"))
        seen = json.loads(untag(r.stdout.strip().splitlines()[-1]))
        self.assertEqual((seen["new"], seen["old"], seen["torch_parsed"]), ("0", "0", "0"), seen)
        r = self.srun("-n1", PYTHON, prog, env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}, cwd=self.work_dir("oldnames"))
        seen = json.loads(untag(r.stdout.strip().splitlines()[-1]))
        self.assertEqual((seen["new"], seen["old"], seen["torch_parsed"]), ("2", "2", "2"), seen)

    def test_ctrl_c_on_srun_leaves_no_process_or_state_behind(self):
        marker = f"sleep {os.getpid() % 1000 + 3000}"  # unique to this test run
        before = set(glob.glob("/dev/shm/gpudiag-*"))

        def ours():
            return set(glob.glob("/dev/shm/gpudiag-*")) - before

        p = subprocess.Popen(["srun", "-n2", "--diag=hang=60s", *marker.split()], env=self.cluster.env,
                             cwd=self.work_dir("ctrlc"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            self.cluster.wait_for(ours, "the watchdog's state dir")
            p.send_signal(signal.SIGINT)
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)  # a second one within a second cancels the step
            p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.cluster.wait_for(lambda: not subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout,
                              "the tasks to end")
        self.cluster.wait_for(lambda: not ours(), "the state dir to go")

    def test_gpudiag_stacks_from_a_running_job(self):
        r = self.cluster.run(["sbatch", "-n2", "--parsable", "-o", "/dev/null", "--wrap",
                              f"srun -n2 {PYTHON} -c 'import time; time.sleep(120)'"], cwd=self.tmp)
        job = r.stdout.strip().split(";")[0]
        try:
            self.cluster.wait_for(lambda: f"{job}.0" in self.cluster.run(["squeue", "-h", "-s", "-o", "%i"]).stdout,
                                  f"step {job}.0 to run")
            time.sleep(1)
            r = self.cluster.run([os.path.join(BUILD, "cli", "gpudiag"), "stacks", f"{job}.0"], cwd=self.tmp,
                                 timeout=120)
        finally:
            self.cluster.run(["scancel", job], check=False)
        self.assertIn(f"gpudiag stacks: job {job}.0 on {self.cluster.node}, 2 task(s)", r.stdout)
        for rank in (0, 1):
            self.assertIn(f"== task rank {rank}:", r.stdout)
        self.assertIn("time.sleep(120)", r.stdout)
        self.assertIn("eu-stack:", r.stdout)
        bad = self.cluster.run([os.path.join(BUILD, "cli", "gpudiag"), "stacks", "12.x"], check=False)
        self.assertEqual(bad.returncode, 3)
        self.assertIn("use JOBID or JOBID.STEPID", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
