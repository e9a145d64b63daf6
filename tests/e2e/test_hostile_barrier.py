"""The preflight barrier and the rendezvous check under a hostile second user (issues
17.5 and 22), as real throwaway users on the real test Slurm:

- the attacker watches /proc/net/tcp* for a port the victim's srun opens, and sends it
  `fail` reports without the token, garbage, an endless line and silent connections,
  and tries to read the token from the victim's processes: the victim's step still
  runs, and the token is never read;
- the attacker squats the MASTER_PORT the plugin will pick for the victim's next jobs:
  under the preflight the victim's step fails at once, naming the port and the fix;
  without it the step runs with that warning;
- the attacker sends the hang spread's SIGURG to the victim's step (scancel) and to
  every process of the victim: both are refused, and no hang report is written."""
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, TwoUsersClusterTest  # noqa: E402

# As the attacker: every new listening TCP6 port of VICTIM_UID gets a forged failure for
# each rank, garbage, a 4000-byte line and 50 silent connections, and a bind of the same
# port on loopback; every process of the victim gets a read of /proc/PID/environ. Prints what it did; runs until killed.
# Another user listens on every port named on its command line that is free (up to the
# whole MASTER_PORT range), as torch's store would, before the victim's job starts.
SQUAT = ("import resource, socket, sys, time\n"
         "resource.setrlimit(resource.RLIMIT_NOFILE, (6000, 6000))\n"
         "held = []\n"
         "for p in sys.argv[1:]:\n"
         "    s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n"
         "    try:\n"
         "        s.bind(('::', int(p))); s.listen(); held.append(s)\n"
         "    except OSError:\n"
         "        s.close()\n"
         "print('ready', flush=True)\n"
         "time.sleep(600)\n")

ATTACK = r"""
import os, socket, sys, time
victim = sys.argv[1]
def listening():
    out = set()
    # gpudiag listens on IPv6 (dual stack); srun's own Slurm ports are IPv4 here, and
    # silent connections to those hold srun in Slurm's code, not gpudiag's.
    for table in ("/proc/net/tcp6",):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for l in lines:
            f = l.split()
            if f[3] == "0A" and f[7] == victim:
                out.add(int(f[1].rsplit(":", 1)[1], 16))
    return out
seen = listening()
held = []
print("ready", flush=True)
while True:
    for port in listening() - seen:
        seen.add(port)
        # Take the port over on a more specific address than srun's wildcard, first, while
        # srun surely listens: the barrier closes its port once every task has its verdict,
        # and a bind after that takes nothing. A bind counts as stolen only if srun's
        # listener was still there beside it.
        for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            try:
                t = socket.socket(fam)
                t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                t.bind((addr, port)); t.listen(); held.append(t)
                print(f"stole {addr} {port}" if port in listening() else f"bound {addr} {port} after srun closed it",
                      flush=True)
            except OSError:
                pass
        for text in [f"gpudiag-barrier {'f' * 32} {r} fail evil\n" for r in range(4)] + ["\x01\x02 junk\n", "x" * 4000]:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=1)
                s.sendall(text.encode())
                held.append(s)
            except OSError:
                pass
        for _ in range(50):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:
                pass
        print(f"attacked {port}", flush=True)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if str(os.stat(f"/proc/{pid}").st_uid) != victim:
                continue
            if b"SLURM_GPUDIAG_PREFLIGHT_BARRIER" in open(f"/proc/{pid}/environ", "rb").read():
                print(f"token read from {pid}", flush=True)
        except OSError:
            pass
    time.sleep(0.002)
"""


class HostileBarrier(TwoUsersClusterTest):

    def as_user(self, user, argv, timeout=60):
        try:
            return user.run(argv, env=dict(self.cluster.env), cwd=user.home, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{argv} as {user.role} still running after {timeout} s: stderr {e.stderr!r}")

    def start_attack(self, script, *args):
        p = self.attacker.popen([PYTHON, "-c", script, *args], env=dict(self.cluster.env), cwd=self.tmp,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.assertEqual(p.stdout.readline().strip(), "ready", p.stderr.read() if p.poll() is not None else "")
        return p

    def next_jobs_unsalted_ports(self, count):
        """Step 0's MASTER_PORT of each of the next `count` jobs as the job id alone gives it
        (spank/plan/dist_env.cpp without the salt): what any user can compute."""
        r = self.cluster.run(["srun", "-n1", "printenv", "SLURM_JOB_ID"], cwd=self.tmp)
        nxt = int(r.stdout.strip()) + 1
        return [61000 + (job * 7919) % (65535 - 61000 + 1) for job in range(nxt, nxt + count)]

    @staticmethod
    def stop_attack(p):
        os.killpg(p.pid, signal.SIGKILL)  # runuser, env and the attacker's python
        out, err = p.communicate(timeout=10)
        return out + err

    def test_another_user_cannot_forge_block_or_read_the_barrier(self):
        attack = self.start_attack(ATTACK, str(self.victim.uid))
        try:
            # Each task reads its own environment once it runs: the token is there, for
            # the victim's eyes only.
            r = self.as_user(self.victim, ["srun", "-n2", "--diag=preflight", PYTHON, "-c",
                                           "import os, time; time.sleep(1); "
                                           "print('started', 'SLURM_GPUDIAG_PREFLIGHT_BARRIER' in os.environ)"])
        finally:
            log = self.stop_attack(attack)
        self.assertIn("attacked", log, "the attacker never saw srun's port: the test proves nothing")
        self.assertNotIn("token read", log)
        self.assertNotIn("stole", log)
        self.assertEqual(r.returncode, 0, r.stderr + log)
        self.assertEqual(r.stdout.count("started"), 2, r.stdout)
        self.assertNotRegex(r.stderr, r"barrier|preflight|evil|error")
        self.assertIn("started True", r.stdout)  # the token was there, for the victim's eyes only

    def test_the_next_jobs_master_port_cannot_be_squatted(self):
        # Without the job's secret salt (spank/plan/port_salt.h) the plugin's port would be a
        # function of the job id: the attacker listens on the next jobs' unsalted ports on
        # the first node before they run. The victim's steps must not land there.
        ports = self.next_jobs_unsalted_ports(3)
        attack = self.start_attack(SQUAT, *map(str, ports))
        prog = [PYTHON, "-c", "import os; print('started', os.environ['MASTER_PORT'])"]
        try:
            enforced = self.as_user(self.victim, ["srun", "-n2", "--diag=preflight", *prog])
            plain = self.as_user(self.victim, ["srun", "-n2", *prog])
        finally:
            self.stop_attack(attack)
        # The check itself still catches the plugin's port when it is taken: an attacker who
        # holds every port of the range holds it whatever the salt, and the preflight makes
        # that an error.
        attack = self.start_attack(SQUAT, *map(str, range(61000, 65536)))
        try:
            mine = self.as_user(self.victim, ["srun", "-n2", "--diag=preflight", *prog])
        finally:
            self.stop_attack(attack)
        fix = (r"gpudiag: port \d+ for MASTER_ADDR cannot be bound on " + self.cluster.node +
               r": Address already in use \(torch's rendezvous listens there\); set MASTER_PORT")
        for run in (enforced, plain):
            self.assertEqual(run.returncode, 0, f"{run.stderr} squatted {ports}")
            self.assertNotRegex(run.stderr, fix)
            used = {int(line.split()[-1]) for line in run.stdout.splitlines() if "started" in line}
            self.assertEqual(len(used), 1, run.stdout)
            self.assertFalse(used & set(ports), f"the step's MASTER_PORT {used} is one the attacker predicted")
        self.assertNotEqual(mine.returncode, 0, mine.stdout)
        self.assertNotIn("started", mine.stdout)
        self.assertRegex(mine.stderr, fix)

    def batch_export_none(self):
        """NONE for sbatch, or NIL where NONE cannot run here. Slurm 26.05 loads the user's
        login environment on the node for `sbatch --export=NONE` (and `--export=VAR`), as if
        --get-user-env were given; for a throwaway user with no login shell that fails and
        the job is held ("user env retrieval failed requeued held", seen on 26.05.5).
        NIL passes nothing of the caller's either, and loads nothing."""
        v = self.cluster.run(["sbatch", "--version"], check=False).stdout.split()  # 26.05 needs the config
        major = int(v[1].split(".")[0]) if len(v) > 1 and v[1].split(".")[0].isdigit() else 0
        return "NIL" if major >= 26 else "NONE"

    def test_a_step_without_the_callers_environment_still_gets_a_salted_port(self):
        # srun/sbatch --export=NONE or --export=VAR (common on clusters that want clean
        # steps) pass only SLURM_* and the named variables on: the salt that sbatch or srun
        # set in its own environment never reaches the step, which falls back to the port
        # every other user can compute from the job id, and squat before the job starts.
        span = 65535 - 61000 + 1
        ports = self.next_jobs_unsalted_ports(3)  # the steps below, as their ids alone give them
        script = os.path.join(self.victim.home, "clean.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n/usr/bin/srun -n1 /bin/sh -c 'echo started $SLURM_JOB_ID $SLURM_STEP_ID $MASTER_PORT "
                    "${SLURM_GPUDIAG_PORT_SALT:-none}'\n")
        os.chown(script, self.victim.uid, -1)
        os.chmod(script, 0o755)
        out = os.path.join(self.victim.home, "clean.out")
        step = ["/bin/sh", "-c", "echo started $SLURM_JOB_ID $SLURM_STEP_ID $MASTER_PORT ${SLURM_GPUDIAG_PORT_SALT:-none}"]
        attack = self.start_attack(SQUAT, *map(str, ports))
        try:
            runs = [self.as_user(self.victim, ["srun", "-n1", "--export=NONE", *step]),
                    self.as_user(self.victim, ["srun", "-n1", "--export=HOME", *step]),
                    self.as_user(self.victim, ["sbatch", "--wait", f"--export={self.batch_export_none()}", "-o", out,
                                               script])]
        finally:
            self.stop_attack(attack)
        with open(out) as f:
            batch = f.read()
        coincidences = 0
        for run, text in zip(runs, [runs[0].stdout, runs[1].stdout, batch]):
            self.assertEqual(run.returncode, 0, run.stderr)
            started = [line.split()[1:] for line in text.splitlines() if line.startswith("started")]
            self.assertEqual(len(started), 1, text)
            job, step_id, port = map(int, started[0][:3])
            salt = started[0][3]
            self.assertRegex(salt, r"^[0-9a-f]{16}$", f"job {job}.{step_id} ran without the job's port salt")
            # Each step against its own unsalted port. A salted one meets it 1 time in 4536
            # (the permutation may map an index to itself): with a salt there, that is chance.
            if port == 61000 + (job * 7919 + step_id) % span:
                coincidences += 1
                print(f"job {job}.{step_id}: salt {salt} maps its port onto the unsalted one (1 in {span})",
                      file=sys.stderr)
        # A plugin that ignored the salt would give every step its unsalted port; two of
        # three by chance happen about 1 time in 7 million.
        self.assertLessEqual(coincidences, 1, "the steps' MASTER_PORTs are the ones any user computes from their ids")

    def test_one_steps_store_does_not_tell_the_next_steps_port(self):
        # Every step of a batch job shares the job's salt; were the salt a shift of the
        # port, step N+1 would listen on step N's port + 1. Torch's store on the first node is
        # a listening socket that /proc/net/tcp* shows any user, with the victim's uid;
        # seeing step 0's, the attacker takes the next port before step 1 starts.
        watch = ("import socket, sys, time\n"
                 "victim = sys.argv[1]; held = []; seen = set()\n"
                 "print('ready', flush=True)\n"
                 "while True:\n"
                 "    for table in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
                 "        for l in open(table).read().splitlines()[1:]:\n"
                 "            f = l.split(); port = int(f[1].rsplit(':', 1)[1], 16)\n"
                 "            if f[3] == '0A' and f[7] == victim and 61000 <= port <= 65535 and port not in seen:\n"
                 "                seen.add(port); nxt = 61000 + (port - 61000 + 1) % 4536\n"
                 "                s = socket.socket(socket.AF_INET6)\n"
                 "                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n"
                 "                try:\n"
                 "                    s.bind(('::', nxt)); s.listen(); held.append(s); print('squat', nxt, flush=True)\n"
                 "                except OSError:\n"
                 "                    pass\n"
                 "    time.sleep(0.005)\n")
        # Step 0 stands in for torch's store: it listens on MASTER_PORT for a moment.
        store = ("import os, socket, time; s = socket.create_server(('', int(os.environ['MASTER_PORT']))); "
                 "print('started', os.environ['MASTER_PORT'], flush=True); time.sleep(1)")
        script = os.path.join(self.victim.home, "steps.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nsrun -n1 {PYTHON} -c \"{store}\"\nsrun -n1 /bin/sh -c 'echo started $MASTER_PORT'\n")
        os.chown(script, self.victim.uid, -1)
        os.chmod(script, 0o755)
        out = os.path.join(self.victim.home, "steps.out")
        attack = self.start_attack(watch, str(self.victim.uid))
        try:
            r = self.as_user(self.victim, ["sbatch", "--wait", "-o", out, script])
        finally:
            log = self.stop_attack(attack)
        with open(out) as f:
            text = f.read()
        self.assertEqual(r.returncode, 0, r.stderr)
        used = [int(line.split()[-1]) for line in text.splitlines() if line.startswith("started")]
        self.assertEqual(len(used), 2, text)
        self.assertIn(f"squat {61000 + (used[0] - 61000 + 1) % 4536}", log, "the attacker never saw step 0's store")
        self.assertNotIn(f"squat {used[1]}", log, f"step 1's MASTER_PORT {used[1]} was computed from step 0's {used[0]}")
        self.assertNotIn("cannot be bound", text)

    def test_another_user_cannot_spread_a_hang_into_the_victims_step(self):
        # The hang spread (issue 17.6) is Slurm's URG signal to the step and the kernel's
        # to the relays: neither lets another user through, so no report is written.
        prog = "import os, time; print('up', os.environ['SLURM_JOB_ID'], flush=True); time.sleep(4)"
        victim = self.victim.popen(["srun", "-n2", "--diag=hang=60s", PYTHON, "-c", prog], env=dict(self.cluster.env),
                                   cwd=self.victim.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            job = victim.stdout.readline().split()[-1]
            poke = ("import os, subprocess, sys\n"
                    "r = subprocess.run(['scancel', '--signal=URG', sys.argv[1] + '.0'], capture_output=True, text=True)\n"
                    "print('scancel', r.returncode, r.stderr.strip())\n"
                    "for pid in os.listdir('/proc'):\n"
                    "    try:\n"
                    "        if pid.isdigit() and str(os.stat('/proc/' + pid).st_uid) == sys.argv[2]:\n"
                    "            os.kill(int(pid), 23); print('signalled', pid)\n"
                    "    except OSError:\n"
                    "        pass\n")
            r = self.as_user(self.attacker, [PYTHON, "-c", poke, job, str(self.victim.uid)])
            out, err = victim.communicate(timeout=60)
        finally:
            if victim.poll() is None:
                os.killpg(victim.pid, signal.SIGKILL)
        self.assertRegex(r.stdout, r"scancel [1-9]")
        self.assertNotIn("signalled", r.stdout)
        self.assertEqual(victim.returncode, 0, err)
        self.assertNotIn("hang", err)
        self.assertEqual([n for n in os.listdir(self.victim.home) if n.startswith("gpudiag-")
                          for f in os.listdir(os.path.join(self.victim.home, n)) if f.startswith("hang")], [])

if __name__ == "__main__":
    unittest.main()
