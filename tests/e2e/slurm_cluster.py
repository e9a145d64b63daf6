"""A throwaway single-host Slurm for end-to-end tests.

munged, slurmctld and slurmd from Debian's packages run in the foreground as our
children, on private ports, with every file under one temp dir. The cluster waits
until its node is idle before it is handed out, and always tears down: on a normal
exit, a failed test, or SIGINT/SIGTERM. It ends only the processes it started.

    with SlurmCluster(extra_conf=["Epilog=/path/to/epilog"]) as c:
        c.run(["srun", "hostname"])
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from torn_down import TornDownOnSignal

START_TIMEOUT = 60


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_version():
    """The installed Slurm's (major, minor), e.g. (22, 5) or (24, 11), from `slurmd -V`."""
    out = subprocess.run(["slurmd", "-V"], capture_output=True, text=True, check=True).stdout.split()[-1]
    major, minor = out.split(".")[:2]
    return int(major), int(minor)


def _short_hostname():
    return socket.gethostname().split(".")[0]


FREEZER = "/sys/fs/cgroup/freezer"

# A run killed outright (SIGKILL: a `timeout`, an OOM kill) cannot tear its cluster down:
# its daemons run on, and a multi-node run's namespaces stay. So each cluster records who
# made it before it starts anything (OWNERS/NAME: pid, that pid's start time, the dir, the
# namespace tag if any), and every start first sweeps the clusters whose maker is gone.
OWNERS = "/run/gpudiag-clusters"


def process_start(pid):
    """The start time of pid (field 22 of /proc/PID/stat), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError, ValueError):
        return None


def record_owner(dirname, tag=""):
    """Records this process as the maker of the cluster in dirname; returns the record's path."""
    os.makedirs(OWNERS, exist_ok=True)
    path = os.path.join(OWNERS, os.path.basename(dirname))
    with open(path, "w") as f:
        f.write(f"{os.getpid()}\n{process_start(os.getpid())}\n{dirname}\n{tag}\n")
    return path


def forget_owner(path):
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


def kill_namespaces(names):
    """SIGKILLs every process in the network namespaces `names`, then deletes them."""
    for name in names:
        for p in subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    for name in names:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def sweep_stale_clusters():
    """Ends what clusters whose maker was killed left: every process whose command line
    names the cluster's dir (munged, slurmctld, slurmd), its namespaces, the dir. A
    cluster whose maker still runs is never touched."""
    try:
        records = os.listdir(OWNERS)
    except OSError:
        return
    for rec in records:
        path = os.path.join(OWNERS, rec)
        try:
            with open(path) as f:
                pid, start, dirname, tag = (f.read().split("\n") + ["", "", "", ""])[:4]
        except OSError:
            continue
        if pid.isdigit() and process_start(int(pid)) == start:
            continue
        if not dirname.startswith(tempfile.gettempdir() + "/gpudiag-"):
            forget_owner(path)
            continue
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if dirname.encode() in cmd:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if tag:
            names = [line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                 text=True).stdout.splitlines()
                     if line.startswith(f"gpudiag-{tag}-")]
            kill_namespaces(names)
        shutil.rmtree(dirname, ignore_errors=True)
        forget_owner(path)
        print(f"gpudiag: ended the test cluster in {dirname}, whose maker (pid {pid}) was killed before it "
              f"could tear it down", file=sys.stderr)


def cgroup_v1_problem():
    """Why proctrack/cgroup cannot run here, or None. Slurm's cgroup/v1 tracks a step's
    processes in the freezer controller, which must be mounted writable."""
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError as e:
        return f"cannot read /proc/self/mounts: {e}"
    for dev, where, fstype, opts, *_ in mounts:
        if where == FREEZER and fstype == "cgroup" and "freezer" in opts.split(","):
            return None if "rw" in opts.split(",") else f"{FREEZER} is mounted read-only"
    return f"no cgroup v1 freezer controller mounted at {FREEZER}"


def cgroup_v1_conf():
    """cgroup.conf for proctrack/cgroup on cgroup v1, for 22.05 and 24.11 alike: both know
    these keys, and nothing is constrained (no task/cgroup), so only the freezer is used."""
    return ["CgroupPlugin=cgroup/v1", "CgroupMountpoint=/sys/fs/cgroup"]


class SlurmCluster(TornDownOnSignal):
    def __init__(self, extra_conf=(), keep=False, gres=None, real_memory=None, select_params="CR_Core",
                 slurmd_env=None, node_name=None, proctrack="proctrack/linuxproc", cgroup_conf=()):
        """`gres` {"gpu": 4} gives the node that many GRES (GPUs get stand-in device files);
        `real_memory` (MiB) with select_params="CR_Core_Memory" makes memory a resource;
        `slurmd_env` adds variables to slurmd's environment only; `node_name` gives the node
        that NodeName instead of the host's name (NodeAddr stays 127.0.0.1, NodeHostname the
        host's name): a name that resolves nowhere, as on clusters whose NodeNames are in no
        hosts file. `proctrack` is the ProctrackType; with "proctrack/cgroup", `cgroup_conf`
        (lines) is the cgroup.conf written next to slurm.conf (see cgroup_v1_conf())."""
        self.extra_conf = list(extra_conf)
        self.slurmd_env = dict(slurmd_env or {})
        self.gres = dict(gres or {})
        self.real_memory = real_memory
        self.select_params = select_params
        self.proctrack = proctrack
        self.cgroup_conf = list(cgroup_conf)
        self.keep = keep or os.environ.get("GPUDIAG_KEEP_CLUSTER") == "1"
        self.node = node_name or _short_hostname()
        self.host = _short_hostname()
        self.procs = []
        self.dir = None

    # -- lifecycle -------------------------------------------------------------------
    def _setup(self):
        self.start()

    def _teardown(self):
        self.stop()

    def start(self):
        # Slurm leaves its cgroup behind (/slurm, or /slurm_NODE where slurmd is built
        # for several per host, as Debian's is), and job ids restart at 1 in the next
        # cluster: remember what was there, to remove what is new at the end.
        self._cgroups_before = set(os.listdir(FREEZER)) if os.path.isdir(FREEZER) else set()
        sweep_stale_clusters()
        self.dir = tempfile.mkdtemp(prefix="gpudiag-slurm-")
        self.owner = record_owner(self.dir)
        # srun --uid=USER talks to munged as that user once it has the allocation.
        os.chmod(self.dir, 0o755)
        for sub in ("state", "spool", "log", "run"):
            os.makedirs(os.path.join(self.dir, sub))
        self._start_munge()
        self.conf = os.path.join(self.dir, "slurm.conf")
        if self.gres:
            self._write_gres_conf()
        if self.cgroup_conf:
            with open(os.path.join(self.dir, "cgroup.conf"), "w") as f:
                f.write("\n".join(self.cgroup_conf) + "\n")
        with open(self.conf, "w") as f:
            f.write(self._slurm_conf())
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        # Debian 13's python3-torch is built without libuv, but torch >= 2.4's TCPStore
        # asks for it by default, so every rendezvous fails ("use_libuv was requested but
        # PyTorch was build without libuv support"). Steps inherit srun's environment;
        # older torch ignores the variable.
        self.env.setdefault("USE_LIBUV", "0")
        for var in [v for v in self.env if v.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
            if var != "SLURM_CONF":
                del self.env[var]
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self._wait(lambda: self.run(["scontrol", "ping"], check=False).stdout.find("UP") >= 0, "slurmctld to answer")
        self._spawn("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", self.node], env=dict(self.env, **self.slurmd_env))
        self._wait(lambda: self.node_state().startswith("IDLE"), f"node {self.node} to be idle")

    def stop(self):
        # slurmstepd daemonizes: cancel our jobs while slurmctld can still do it, so no
        # step outlives the cluster.
        if any(name == "slurmctld" and p.poll() is None for name, p in self.procs):
            try:
                jobs = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout=10).stdout.split()
                if jobs:
                    self.run(["scancel"] + jobs, check=False, timeout=10)
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline and self.run(["squeue", "-h"], check=False, timeout=10).stdout.strip():
                        time.sleep(0.2)
            except (subprocess.SubprocessError, OSError):
                pass
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        if self.proctrack == "proctrack/cgroup" and os.path.isdir(FREEZER):
            for name in set(os.listdir(FREEZER)) - self._cgroups_before:
                if name.startswith("slurm"):
                    self._remove_cgroups(os.path.join(FREEZER, name))
        if self.dir and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        forget_owner(getattr(self, "owner", None))

    @staticmethod
    def _remove_cgroups(top):
        """rmdir a cgroup tree bottom-up (its files go with each directory); a cgroup that
        still holds a process stays, and says so."""
        if not os.path.isdir(top):
            return
        for root, dirs, _ in os.walk(top, topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError as e:
                    print(f"slurm_cluster: cannot remove cgroup {os.path.join(root, d)}: {e}")
        try:
            os.rmdir(top)
        except OSError as e:
            print(f"slurm_cluster: cannot remove cgroup {top}: {e}")

    # -- helpers for tests -----------------------------------------------------------
    def run(self, argv, check=True, timeout=120, env=None, text=True, unset=(), **kw):
        """Runs a command against this cluster (no shell) and returns CompletedProcess.
        `env` adds variables, `unset` removes them."""
        e = dict(self.env)
        e.update(env or {})
        for name in unset:
            e.pop(name, None)
        r = subprocess.run(argv, env=e, capture_output=True, text=text, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv} exited {r.returncode}\nstdout: {r.stdout[-2000:]!r}\nstderr: {r.stderr[-2000:]!r}\n"
                                 f"{self.logs()}")
        return r

    def show_node(self):
        return self.run(["scontrol", "show", "node", self.node]).stdout

    def node_state(self):
        r = self.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%T"], check=False)
        return r.stdout.strip().upper() if r.returncode == 0 else ""

    def node_reason(self):
        r = self.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%E"])
        return r.stdout.strip()

    def drain(self, reason):
        self.run(["scontrol", "update", f"NodeName={self.node}", "State=DRAIN", f"Reason={reason}"])

    def resume(self):
        self.run(["scontrol", "update", f"NodeName={self.node}", "State=RESUME"])

    def wait_for(self, predicate, what, timeout=30):
        self._wait(predicate, what, timeout)

    def logs(self):
        out = []
        for name in ("slurmctld", "slurmd", "munged"):
            path = os.path.join(self.dir or "", "log", f"{name}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- {name}.log (tail)\n" + "".join(f.readlines()[-30:]))
        return "\n".join(out)

    # -- internals -------------------------------------------------------------------
    def _spawn(self, name, argv, env=None):
        log = open(os.path.join(self.dir, "log", f"{name}.out"), "w")
        try:
            p = subprocess.Popen(argv, env=env or self.env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        finally:
            log.close()  # the child has its own copy
        self.procs.append((name, p))

    def _start_munge(self):
        key = os.path.join(self.dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(self.dir, "run", "munge.socket")
        self.env = dict(os.environ)
        self._spawn("munged", ["munged", "-F", "--force", "--key-file", key, "--socket", self.munge_socket,
                               "--pid-file", os.path.join(self.dir, "run", "munged.pid"),
                               "--log-file", os.path.join(self.dir, "log", "munged.log"),
                               "--seed-file", os.path.join(self.dir, "run", "munged.seed")])
        self._wait(lambda: os.path.exists(self.munge_socket), "munged's socket")

    def _slurm_conf(self):
        d = self.dir
        # More CPUs than the machine has, so tests can run -n4 steps side by side on a
        # 2-core VM; config_overrides makes slurmd accept the difference.
        cpus = max(16, os.cpu_count() or 1)
        lines = [
            "ClusterName=gpudiagtest",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/run/slurmctld.pid",
            f"SlurmdPidFile={d}/run/slurmd.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd.log",
            f"ProctrackType={self.proctrack}",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            f"SelectTypeParameters={self.select_params}",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdTimeout=30",
            "SlurmdParameters=config_overrides",
            "InactiveLimit=0",
            "KillWait=5",
            # sbatch --wait polls at 2 s, then 8 s later unless MinJobAge <= 5 (its job
            # could be purged in between): a 3 s batch job then takes 2+2 s, not 2+8.
            "MinJobAge=5",
            *([f"GresTypes={','.join(self.gres)}"] if self.gres else []),
            f"NodeName={self.node} NodeAddr=127.0.0.1"
            + (f" NodeHostname={self.host}" if self.node != self.host else "")
            + f" CPUs={cpus}"
            + (f" RealMemory={self.real_memory}" if self.real_memory else "")
            + (" Gres=" + ",".join(f"{n}:{c}" for n, c in self.gres.items()) if self.gres else "")
            + " State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ]
        # 23.11 removed task/none: there, no TaskPlugin line means no task plugin.
        if slurm_version() < (23, 11):
            lines.append("TaskPlugin=task/none")
        lines += self.extra_conf
        return "\n".join(lines) + "\n"

    def _write_gres_conf(self):
        # slurmd reads gres.conf from slurm.conf's directory. Slurm 22.05 drops a gpu
        # GRES without File= ("Removing file-less GPU"), so each GPU gets a stand-in
        # device file; with TaskPlugin=task/none nothing opens or constrains it.
        lines = []
        for name, count in self.gres.items():
            if name == "gpu":
                dev = os.path.join(self.dir, "dev")
                os.makedirs(dev, exist_ok=True)
                for i in range(count):
                    open(os.path.join(dev, f"nvidia{i}"), "w").close()
                lines.append(f"NodeName={self.node} Name=gpu File={dev}/nvidia[0-{count - 1}]\n")
            else:
                lines.append(f"NodeName={self.node} Name={name} Count={count}\n")
        with open(os.path.join(self.dir, "gres.conf"), "w") as f:
            f.writelines(lines)

    def _wait(self, predicate, what, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited {p.returncode} while waiting for {what}\n{self._outs()}")
            try:
                if predicate():
                    return
            except (subprocess.SubprocessError, OSError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"timed out waiting for {what}\n{self._outs()}\n{self.logs()}")

    def _outs(self):
        out = []
        for name, _ in self.procs:
            path = os.path.join(self.dir, "log", f"{name}.out")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- {name} output\n{f.read()[-2000:]}")
        return "\n".join(out)
