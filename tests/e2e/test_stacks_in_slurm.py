"""`gpudiag stacks` on the jobs that need it most, against a real Slurm with gpudiag.so:
a job that holds every GPU and all memory of its node (issue 15.5), asked from outside
and from inside the job; run by root for another user's job; and a neighbour whose
process fakes SLURM_JOB_ID, which must not be reported (issue 21)."""
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import SlurmCluster  # noqa: E402
from throwaway_users import ThrowawayUsers  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build")))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GPUDIAG = os.path.join(BUILD, "cli", "gpudiag")
PYTHON = "/usr/bin/python3"
PROGRAM = f"{PYTHON} -c 'import time; time.sleep(300)'"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


class StacksOfBusyJobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpudiag-stacks-")
        os.chmod(cls.tmp, 0o755)
        config = os.path.join(cls.tmp, "gpudiag.yaml")
        shutil.copy(os.path.join(SOURCE, "etc", "gpudiag.yaml"), config)
        plugstack = os.path.join(cls.tmp, "plugstack.conf")
        with open(plugstack, "w") as f:
            f.write(f"required {os.path.join(BUILD, 'spank', 'gpudiag.so')} config={config}\n")
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
        self.assertNotIn("3131", r.stdout)
        self.assertNotRegex(r.stdout, rf"pid {faker.pid}\b")

    def test_root_on_a_finished_job_is_told_clearly(self):
        r = self.cluster.run([GPUDIAG, "stacks", "999999"], check=False, timeout=30)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"^gpudiag: .*999999")


if __name__ == "__main__":
    unittest.main(verbosity=2)
