"""A throwaway multi-node Slurm on one host: every node in namespaces of its own.

N compute nodes (default 3) and a login node, each with its own network namespace (an
address on a bridge that lives in a namespace of its own, never in the host's), its own
UTS namespace (hostname = node name) and its own mount namespace (a private /etc/hosts;
optionally an InfiniBand fixture as /sys/class/infiniband, or files bound over others).
slurmctld runs on the login node, a slurmd (`-N name`) on each compute node, one munged
in the host serves them all through its socket file. srun, sbatch, sinfo and anything
given to run() execute on the login node.

Namespaces are entered with `nsenter --net=/run/netns/NAME`, never `ip netns exec`: that
remounts /sys and hides /sys/fs/cgroup, which slurmd 22.05 needs. Each node has a holder
process (`sleep`) that keeps its UTS and mount namespaces; daemons and commands join it
with `nsenter -t HOLDER -n -u -m`.

Names carry a per-run tag, so two runs never collide. Always torn down (processes in
the namespaces, namespaces with their veths and bridge, mounts, files): on exit, on a
failed test, on SIGINT/SIGTERM; what a run killed outright left is swept by the next
start (slurm_cluster.sweep_stale_clusters: the owner record names the namespace tag).

    with MultiNodeCluster(nodes=3, extra_conf=[...], ib={"n2": {"mlx5_0": "up"}}) as c:
        c.run(["srun", "-N3", "hostname"])
"""
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import (OWNERS, SlurmCluster, forget_owner, kill_namespaces, process_start,  # noqa: E402
                           record_owner, slurm_version, sweep_stale_clusters)

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_SETUP = os.path.join(HERE, "multinode_node.py")
PYTHON = "/usr/bin/python3"
SUBNET = "10.77.0"
SLURMCTLD_PORT = 6817  # each node has its own network stack: fixed ports cannot collide
SLURMD_PORT = 6818

IB_PORT_UP = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
              "link_layer": "InfiniBand"}
IB_PORT_DOWN = dict(IB_PORT_UP, state="1: DOWN", phys_state="2: Polling")


def namespaces_usable():
    """None when this host can make network namespaces and enter them, else why not."""
    name = f"gpudiag-probe-{os.getpid()}-{secrets.token_hex(2)}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns add` fails here: {r.stderr.strip()}"
    try:
        r = subprocess.run(["nsenter", f"--net=/run/netns/{name}", "--", "unshare", "--uts", "--mount",
                            "--propagation", "unchanged", "--", "true"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"nsenter/unshare into a network namespace fails here: {r.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def sweep_untagged_namespaces():
    """Namespaces of multi-node runs from before owner records (tag = pid % 100000 then 4
    hex digits): removed where that pid is gone. Runs with a record: sweep_stale_clusters."""
    known = set()
    try:
        for rec in os.listdir(OWNERS):
            with open(os.path.join(OWNERS, rec)) as f:
                known.add((f.read().split("\n") + ["", "", "", ""])[3])
    except OSError:
        pass
    tags = {}
    for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()[0].split("-") if line.split() else []
        if len(parts) == 3 and parts[0] == "gpudiag" and parts[1] != "probe" and parts[1] not in known:
            tags.setdefault(parts[1], []).append(line.split()[0])
    for tag, names in tags.items():
        pid = tag[:-4]
        if pid.isdigit() and process_start(int(pid)) is not None:
            continue
        kill_namespaces(names)
        print(f"gpudiag: removed the namespaces of a killed multi-node run: {', '.join(sorted(names))}",
              file=sys.stderr)


def write_ib_fixture(root, ports):
    """An /sys/class/infiniband tree: {"mlx5_0": "up", "mlx5_1": "down"}, port 1 each."""
    for hca, state in ports.items():
        d = os.path.join(root, hca, "ports", "1")
        os.makedirs(d)
        for attr, value in (IB_PORT_UP if state == "up" else IB_PORT_DOWN).items():
            with open(os.path.join(d, attr), "w") as f:
                f.write(value + "\n")


class MultiNodeCluster(SlurmCluster):
    def __init__(self, nodes=3, extra_conf=(), keep=False, names_resolve=True, ib=None, binds=None,
                 slurmd_env=None, return_to_service=2):
        """`nodes` compute nodes; `ib` {node: {hca: "up"|"down"}} shows that fixture as the
        node's /sys/class/infiniband; `binds` {node: [(src, dst)]} binds files over others
        on that node (e.g. its own gpudiag.yaml); names_resolve=False puts the addresses
        in slurm.conf as NodeAddr and leaves the node names out of every /etc/hosts, so
        a node name resolves nowhere (issue 22; only the login node, where slurmctld
        runs, resolves its own name). return_to_service=1 keeps a node an
        admin set DOWN down when its slurmd registers again (2 returns it to service)."""
        self.return_to_service = return_to_service
        super().__init__(extra_conf=extra_conf, keep=keep, slurmd_env=slurmd_env)
        self.tag = f"{os.getpid() % 100000}{secrets.token_hex(2)}"
        self.login = "login"
        self.nodes = [f"n{i}" for i in range(1, nodes + 1)]
        self.node = self.nodes[0]  # SlurmCluster's one-node helpers act on the first node
        self.names_resolve = names_resolve
        self.ib = dict(ib or {})
        self.binds = {k: list(v) for k, v in (binds or {}).items()}
        self.netns = []
        self.holders = {}
        self.addr = {self.login: f"{SUBNET}.1"}
        self.addr.update({n: f"{SUBNET}.{10 + i}" for i, n in enumerate(self.nodes, 1)})

    # -- lifecycle -------------------------------------------------------------------
    def start(self):
        why = namespaces_usable()
        if why:
            raise RuntimeError(f"gpudiag: no multi-node cluster on this host: {why}")
        sweep_stale_clusters()
        sweep_untagged_namespaces()
        self.dir = tempfile.mkdtemp(prefix="gpudiag-multinode-")
        os.chmod(self.dir, 0o755)
        self.owner = record_owner(self.dir, self.tag)  # before any namespace: a sweep knows whose it is
        for sub in ("state", "spool", "log", "run", "nodes"):
            os.makedirs(os.path.join(self.dir, sub))
        for node in self.nodes:
            os.makedirs(os.path.join(self.dir, "spool", node))  # slurmd makes only the last level's files
        self._start_network()
        self._start_munge()
        self.conf = os.path.join(self.dir, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(self._slurm_conf())
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.env.setdefault("USE_LIBUV", "0")  # see SlurmCluster.start
        for var in [v for v in self.env if v.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
            if var != "SLURM_CONF":
                del self.env[var]
        for node in [self.login] + self.nodes:
            self._start_holder(node)
        self._spawn("slurmctld", self.enter(self.login, ["slurmctld", "-D", "-i", "-f", self.conf]))
        self._wait(lambda: "UP" in self.run(["scontrol", "ping"], check=False, timeout=10).stdout,
                   "slurmctld to answer")
        for node in self.nodes:
            self._spawn(f"slurmd.{node}", self.enter(node, ["slurmd", "-D", "-f", self.conf, "-N", node]),
                        env=dict(self.env, **self.slurmd_env))
        self._wait(lambda: all(s.upper().startswith("IDLE") for s in self.states().values())
                   and len(self.states()) == len(self.nodes), "every node to be idle")

    def stop(self):
        try:
            super().stop()  # cancels jobs, ends slurmd/slurmctld/munged; keeps self.dir for us
        finally:
            # Whatever is still in our namespaces is ours (steps, tasks, holders).
            for name in self.netns:
                r = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
                for pid in r.stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            for name, p in self.holders.items():
                if p.poll() is None:
                    p.kill()
                p.wait()
            self.holders = {}
            for name in reversed(self.netns):
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
            self.netns = []
            forget_owner(getattr(self, "owner", None))

    def _teardown(self):
        keep_dir, self.keep = self.keep, True  # SlurmCluster.stop would remove dir before namespaces go
        try:
            self.stop()
        finally:
            self.keep = keep_dir
            if self.dir and not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers for tests -----------------------------------------------------------
    def enter(self, node, argv, cwd=None):
        """argv run on `node` (its network, hostname and mounts)."""
        wd = [f"--wd={cwd}"] if cwd else []
        # --root: the holder's root, which differs from the mount namespace's own in a
        # chroot (scripts/test-on); entering a mount namespace resets it otherwise.
        return ["nsenter", "-t", str(self.holders[node].pid), "-n", "-u", "-m", "--root", *wd, "--", *argv]

    def run(self, argv, check=True, timeout=120, env=None, text=True, unset=(), cwd=None, on=None, **kw):
        """Runs a command on the login node (or on node `on`) and returns CompletedProcess."""
        return super().run(self.enter(on or self.login, argv, cwd=cwd or os.getcwd()), check=check,
                           timeout=timeout, env=env, text=text, unset=unset, **kw)

    def states(self):
        r = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False, timeout=10)
        return dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)

    def node_state(self, node=None):
        return self.states().get(node or self.node, "").upper()

    def node_reason(self, node=None):
        return self.run(["sinfo", "-h", "-N", "-n", node or self.node, "-o", "%E"]).stdout.strip()

    def drain(self, reason, node=None):
        self.run(["scontrol", "update", f"NodeName={node or self.node}", "State=DRAIN", f"Reason={reason}"])

    def set_down(self, reason, node=None):
        self.run(["scontrol", "update", f"NodeName={node or self.node}", "State=DOWN", f"Reason={reason}"])

    def resume(self, node=None):
        self.run(["scontrol", "update", f"NodeName={node or self.node}", "State=RESUME"])

    def logs(self):
        out = []
        for name in ["slurmctld", "munged"] + [f"slurmd.{n}" for n in self.nodes]:
            path = os.path.join(self.dir or "", "log", f"{name}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- {name}.log (tail)\n" + "".join(f.readlines()[-30:]))
        return "\n".join(out)

    # -- internals -------------------------------------------------------------------
    def _ip(self, *args, ns=None):
        # In a namespace through nsenter, not `ip -n`: that one remounts /sys as `ip netns
        # exec` does, which fails in scripts/test-on's chroot.
        argv = (["nsenter", f"--net=/run/netns/{ns}", "--"] if ns else []) + ["ip", *args]
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"gpudiag: {' '.join(argv)} failed: {r.stderr.strip()}")

    def _start_network(self):
        bridge_ns = f"gpudiag-{self.tag}-br"
        self._ip("netns", "add", bridge_ns)
        self.netns.append(bridge_ns)
        self._ip("link", "add", "br0", "type", "bridge", ns=bridge_ns)
        self._ip("link", "set", "br0", "up", ns=bridge_ns)
        for i, node in enumerate([self.login] + self.nodes):
            ns = f"gpudiag-{self.tag}-{node}"
            self._ip("netns", "add", ns)
            self.netns.append(ns)
            # Made inside the bridge's namespace, its peer straight into the node's: no
            # interface ever appears in the host's namespace.
            self._ip("link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns, ns=bridge_ns)
            self._ip("link", "set", f"v{i}", "master", "br0", "up", ns=bridge_ns)
            self._ip("addr", "add", f"{self.addr[node]}/24", "dev", "eth0", ns=ns)
            self._ip("link", "set", "eth0", "up", ns=ns)
            self._ip("link", "set", "lo", "up", ns=ns)

    def _start_holder(self, node):
        d = os.path.join(self.dir, "nodes", node)
        os.makedirs(d)
        hosts = os.path.join(d, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            if self.names_resolve:
                f.writelines(f"{a} {n}\n" for n, a in self.addr.items())
            elif node == self.login:
                # slurmctld (here) reaches srun by srun's host name whenever a step ends
                # or is cancelled; 24.11 retries a name that does not resolve for 10 s,
                # with the job lock held. Sites resolve their submit hosts on the controller.
                f.write(f"{self.addr[node]} {node}\n")
        argv = [PYTHON, NODE_SETUP, "--hostname", node, "--hosts", hosts]
        if node in self.ib:
            fixture = os.path.join(d, "infiniband")
            write_ib_fixture(fixture, self.ib[node])
            argv += ["--ib", fixture, "--stage", os.path.join(d, "class")]
        for src, dst in self.binds.get(node, []):
            argv += ["--bind", f"{src}:{dst}"]
        ns = f"/run/netns/gpudiag-{self.tag}-{node}"
        log = open(os.path.join(self.dir, "log", f"holder.{node}.out"), "w")
        try:
            p = subprocess.Popen(["nsenter", f"--net={ns}", "--", "unshare", "--uts", "--mount", "--propagation",
                                  "unchanged", "--", *argv, "--",
                                  "sleep", "infinity"], stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        finally:
            log.close()
        self.holders[node] = p
        # nsenter and unshare exec in place: the holder is ready once it is `sleep`.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if p.poll() is not None:
                with open(os.path.join(self.dir, "log", f"holder.{node}.out"), errors="replace") as f:
                    raise RuntimeError(f"node {node} could not be set up (exit {p.returncode}): {f.read()[-2000:]}")
            try:
                with open(f"/proc/{p.pid}/comm") as f:
                    if f.read().strip() == "sleep":
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"node {node} was not set up in 30 s")

    def _slurm_conf(self):
        d = self.dir
        cpus = max(16, os.cpu_count() or 1)
        login_addr = self.addr[self.login]
        lines = [
            "ClusterName=gpudiagmulti",
            f"SlurmctldHost={self.login}({login_addr})",
            f"SlurmctldPort={SLURMCTLD_PORT}",
            f"SlurmdPort={SLURMD_PORT}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid",
            f"SlurmdPidFile={d}/run/slurmd.%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd.%n.log",
            "ProctrackType=proctrack/linuxproc",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            f"ReturnToService={self.return_to_service}",
            "SlurmdTimeout=30",
            "SlurmdParameters=config_overrides",
            "InactiveLimit=0",
            "KillWait=5",
            # sbatch --wait polls at 2 s, then 8 s later unless MinJobAge <= 5 (its job
            # could be purged in between): a 3 s batch job then takes 2+2 s, not 2+8.
            "MinJobAge=5",
        ]
        for node in self.nodes:
            # With names_resolve, Slurm finds each node by its name (NodeAddr defaults to
            # it), as most sites do; without, only by the address given here.
            addr = "" if self.names_resolve else f" NodeAddr={self.addr[node]}"
            lines.append(f"NodeName={node}{addr} CPUs={cpus} State=UNKNOWN")
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES")
        if slurm_version() < (23, 11):
            lines.append("TaskPlugin=task/none")
        lines += self.extra_conf
        return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # A smoke run: start, show the nodes, run a 3-node step, tear down.
    with MultiNodeCluster() as c:
        print(c.run(["sinfo", "-N"]).stdout)
        print(c.run(["srun", "-N3", "-n6", "hostname"]).stdout)
