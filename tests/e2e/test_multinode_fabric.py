"""`srun --diag=fabric` (issue 32) on a real 3-node Slurm whose nodes each live in their
own network namespaces (multinode_cluster.py): before the program starts on any node,
the nodes test what lies between them through srun, and the step starts or fails with a
verdict on srun's stderr and fabric.json in the diag dir.

One cluster for every case; each case leaves the network as it found it."""
import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_cluster import MultiNodeCluster, namespaces_usable  # noqa: E402
from plugin_cluster import BUILD, PLUGIN, PYTHON, SOURCE, plugstack_line  # noqa: E402
from test_plugin_torch import CLEAN  # noqa: E402
from throwaway_users import ThrowawayUsers  # noqa: E402

RDZV_PORT = "29517"  # a user-set MASTER_PORT, so a case can block or squat it
# Each task leaves a file named for its host and rank: proof that the program started.
MARK = "import os, socket; open('ran.%s.%s' % (socket.gethostname(), os.environ['SLURM_PROCID']), 'w').close()"
STEP_LIMIT = 90  # no case may take longer: the fabric test's own deadline is 40 s
# RDMA on a fake libibverbs whose RC writes really cross the namespaces (over TCP between
# the nodes' addresses), so a shaped link is slow over "RDMA" too.
FAKE_IBVERBS = os.path.join(BUILD, "tests", "fakes", "libfake_ibverbs.so")


class MultiNodeFabric(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = namespaces_usable()
        if why:
            raise unittest.SkipTest(why)
        cls.tmp = tempfile.mkdtemp(prefix="gpudiag-fabric-")
        os.chmod(cls.tmp, 0o755)
        with open(os.path.join(SOURCE, "etc", "gpudiag.yaml")) as f:
            text = f.read()
        # The namespace nodes have no IB and no raised memlock limit: the node preflight
        # would fail every node, and these cases are about what lies between them.
        text = text.replace("    memlock: true ", "    memlock: false ")
        text += f"\nfabric:\n  rdma_library: {FAKE_IBVERBS}\n"
        cls.config = os.path.join(cls.tmp, "gpudiag.yaml")
        cls.config_text = text
        with open(cls.config, "w") as f:
            f.write(text)
        # n3 reads its own copy (bound over the path): the "node that differs" case edits it.
        cls.n3_config = os.path.join(cls.tmp, "gpudiag-n3.yaml")
        shutil.copy(cls.config, cls.n3_config)
        plugstack = os.path.join(cls.tmp, "plugstack.conf")
        with open(plugstack, "w") as f:
            f.write(plugstack_line(PLUGIN, cls.config, cls.tmp))
        cls.cluster = MultiNodeCluster(nodes=3, extra_conf=[f"PlugStackConfig={plugstack}"],
                                       binds={"n3": [(cls.n3_config, cls.config)]})
        try:
            cls.cluster.__enter__()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.work = tempfile.mkdtemp(dir=self.tmp)
        os.chmod(self.work, 0o755)

    # -- helpers ---------------------------------------------------------------------
    def fabric_step(self, *extra, env=None, user=None):
        argv = ["srun", "-N3", "-n3", "--diag=fabric", *extra, PYTHON, "-c", MARK]
        unset = [k for k in CLEAN if k not in (env or {})]
        if user is not None:
            # Entered as root, then the user's own srun (runuser inside the login node).
            e = dict(self.cluster.env, **(env or {}), HOME=user.home, USER=user.name, LOGNAME=user.name)
            for k in unset:
                e.pop(k, None)
            argv = ["runuser", "-u", user.name, "--", "env", "-i", *[f"{k}={v}" for k, v in e.items()], *argv]
        start = time.monotonic()
        r = self.cluster.run(argv, cwd=self.work, timeout=STEP_LIMIT, check=False, env=env, unset=unset)
        r.seconds = time.monotonic() - start
        # What the user saw, in the test's log.
        print("\n".join(line for line in r.stderr.splitlines() if "gpudiag" in line), file=sys.stderr)
        return r

    def ran(self):
        return sorted(os.path.basename(p) for p in glob.glob(os.path.join(self.work, "ran.*")))

    def report(self):
        paths = glob.glob(os.path.join(self.work, "gpudiag-*", "fabric.json"))
        self.assertEqual(len(paths), 1, os.listdir(self.work))
        with open(paths[0]) as f:
            return json.load(f)

    def verdict_lines(self, r):
        return [line for line in r.stderr.splitlines() if "gpudiag: fabric:" in line]

    def ns(self, node):
        return f"/run/netns/gpudiag-{self.cluster.tag}-{node}"

    def sh_in(self, node, *argv, check=True):
        r = subprocess.run(["nsenter", f"--net={self.ns(node)}", "--", *argv], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv} in {node}: {r.stderr}")
        return r

    @contextlib.contextmanager
    def shaped(self, node):
        """`tc tbf` at 50 Mbit/s on both ends of the node's link: its eth0 and the bridge's veth."""
        veth = f"v{self.cluster.nodes.index(node) + 1}"
        tbf = ["root", "tbf", "rate", "50mbit", "burst", "64kbit", "latency", "200ms"]
        self.sh_in(node, "tc", "qdisc", "add", "dev", "eth0", *tbf)
        self.sh_in("br", "tc", "qdisc", "add", "dev", veth, *tbf)
        try:
            yield
        finally:
            self.sh_in(node, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
            self.sh_in("br", "tc", "qdisc", "del", "dev", veth, "root", check=False)

    @contextlib.contextmanager
    def port_dropped(self, node, port):
        """A firewall in front of the node (no iptables, nft or tc actions on this kernel):
        on the bridge's veth towards it, TCP to `port` is classified (u32) into an HTB class
        whose queue holds nothing (pfifo limit 0), so those packets are dropped; the rest
        goes through a class as fast as the link."""
        veth = f"v{self.cluster.nodes.index(node) + 1}"
        tc = ["tc", "qdisc", "add", "dev", veth]
        self.sh_in("br", *tc, "root", "handle", "1:", "htb", "default", "1")
        try:
            for cls in ("1:1", "1:2"):
                self.sh_in("br", "tc", "class", "add", "dev", veth, "parent", "1:", "classid", cls, "htb", "rate",
                           "100gbit")
            self.sh_in("br", *tc, "parent", "1:2", "handle", "20:", "pfifo", "limit", "0")
            self.sh_in("br", "tc", "filter", "add", "dev", veth, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                       "match", "ip", "dport", str(port), "0xffff", "flowid", "1:2")
            yield
        finally:
            self.sh_in("br", "tc", "qdisc", "del", "dev", veth, "root", check=False)

    @contextlib.contextmanager
    def nccl_on_the_fake_gpus(self):
        """Every node runs NCCL pairs through the GPU probe on the fake CUDA and NCCL
        (tests/fakes): rank 0's probe makes the unique id, srun passes it on, both ranks'
        all_reduce crosses the namespaces."""
        fakes = os.path.join(BUILD, "tests", "fakes")
        gpu = (f"  probe: {os.path.join(BUILD, 'libexec', 'gpudiag', 'gpudiag-gpu-probe')}\n"
               f"  libraries:\n    cuda: {os.path.join(fakes, 'libfake_cuda.so')}\n"
               f"    nccl: {os.path.join(fakes, 'libfake_nccl.so')}\n  probe_timeout: 40s\n")
        self.assertEqual(self.config_text.count("  probe_timeout: 40s\n"), 1)
        text = self.config_text.replace("  probe_timeout: 40s\n", gpu) + "  nccl: \"true\"\n"
        paths = (self.config, self.n3_config)
        try:
            for path in paths:
                with open(path, "r+") as f:  # the same inode: the bind on n3 sees it
                    f.seek(0)
                    f.truncate()
                    f.write(text)
            yield
        finally:
            for path in paths:
                with open(path, "r+") as f:
                    f.seek(0)
                    f.truncate()
                    f.write(self.config_text)

    # -- cases -----------------------------------------------------------------------
    def test_1_a_healthy_fabric_passes_with_every_pairs_figure(self):
        with self.nccl_on_the_fake_gpus():
            r = self.fabric_step(env={"FAKE_GPUS": "1"})
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
        self.assertEqual(self.ran(), ["ran.n1.0", "ran.n2.1", "ran.n3.2"])
        lines = self.verdict_lines(r)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("3 nodes, 3 pairs", lines[0])
        self.assertIn(": ok", lines[0])
        rep = self.report()
        self.assertEqual(rep["verdict"], "ok", rep)
        tcp = [p for p in rep["pairs"] if p["transport"] == "tcp"]
        self.assertEqual(sorted((p["a"], p["b"]) for p in tcp), [("n1", "n2"), ("n1", "n3"), ("n2", "n3")])
        for p in tcp:
            self.assertGreater(p["a_to_b_gbps"], 0.5, p)
            self.assertGreater(p["b_to_a_gbps"], 0.5, p)
        # RDMA (the fake): every pair both ways, on the HCA port NCCL would use.
        self.assertIn("Gb/s over RDMA (mlx5_0:1)", lines[0])
        self.assertTrue(rep["rdma"]["tested"], rep["rdma"])
        self.assertEqual(rep["rdma"]["nodes"], {n: {"hca": "mlx5_0:1"} for n in ("n1", "n2", "n3")})
        rdma = [p for p in rep["pairs"] if p["transport"] == "rdma"]
        self.assertEqual(sorted((p["a"], p["b"]) for p in rdma), [("n1", "n2"), ("n1", "n3"), ("n2", "n3")])
        for p in rdma:
            self.assertGreater(p["a_to_b_gbps"], 0.05, p)
            self.assertGreater(p["b_to_a_gbps"], 0.05, p)
        self.assertTrue(all("error" not in t for t in rep["tests"] if t["transport"] == "rdma"), rep["tests"])
        # NCCL (the probe on the fake CUDA and NCCL): every pair, each rank's bus bandwidth.
        self.assertIn("Gb/s over NCCL (bus bandwidth)", lines[0])
        self.assertTrue(rep["nccl"]["tested"], rep["nccl"])
        nccl = [p for p in rep["pairs"] if p["transport"] == "nccl"]
        self.assertEqual(sorted((p["a"], p["b"]) for p in nccl), [("n1", "n2"), ("n1", "n3"), ("n2", "n3")])
        for p in nccl:
            self.assertGreater(p["a_to_b_gbps"], 0.05, p)
            self.assertGreater(p["b_to_a_gbps"], 0.05, p)
        reach = [t for t in rep["tests"] if t["kind"] == "reach"]
        self.assertEqual(sorted(t["from"] for t in reach), ["n2", "n3"])
        self.assertTrue(all(t["to"] == "n1" and "error" not in t for t in reach), reach)
        print(f"healthy fabric step: {r.seconds:.1f} s, fabric test {rep['seconds']:.1f} s, "
              f"{rep['rounds']} rounds", file=sys.stderr)

    def test_2_one_shaped_node_is_named_alone_and_nothing_starts(self):
        with self.shaped("n3"):
            r = self.fabric_step()
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
        self.assertEqual(self.ran(), [], "the program started beside a slow node")
        lines = self.verdict_lines(r)
        self.assertLessEqual(len(lines), 5, r.stderr)
        self.assertIn("does not start", lines[0])
        self.assertTrue(any("n3 is slow with every partner (" in line for line in lines), r.stderr)
        self.assertTrue(any("n3 is slow with every partner over RDMA" in line for line in lines), r.stderr)
        self.assertFalse(any(f"{n} is slow" in line for line in lines for n in ("n1", "n2")), r.stderr)
        # The admin's command, once, for n3 alone (gpudiag-health never drains on it: a user wrote it).
        self.assertEqual(lines[-1], 'gpudiag: fabric: to drain (an admin, after a look): scontrol update NodeName=n3 '
                                    'State=DRAIN Reason="gpudiag fabric: slow with every partner"')
        rep = self.report()
        self.assertEqual(rep["drain"], ["n3"], rep)
        self.assertEqual(rep["verdict"], "fail")

    def test_3_a_blocked_rendezvous_port_is_named(self):
        with self.port_dropped("n1", RDZV_PORT):
            r = self.fabric_step(env={"MASTER_PORT": RDZV_PORT})
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
        self.assertEqual(self.ran(), [])
        lines = self.verdict_lines(r)
        for n in ("n2", "n3"):
            self.assertTrue(any(f"{n} cannot reach n1:{RDZV_PORT}/tcp" in line for line in lines), r.stderr)

    def test_4_a_node_with_a_differing_nccl_value_is_named(self):
        with open(self.n3_config, "r+") as f:  # the same inode: the bind on n3 sees it
            f.seek(0)
            f.truncate()
            # ...and has no libibverbs: it skips RDMA, said in one line, and the others test it.
            f.write(self.config_text.replace("  nccl_env:\n", "  nccl_env:\n    NCCL_SOCKET_NTHREADS: \"4\"\n", 1)
                    .replace(FAKE_IBVERBS, "/nonexistent/libibverbs.so.1"))
        try:
            r = self.fabric_step()
        finally:
            with open(self.n3_config, "r+") as f:
                f.seek(0)
                f.truncate()
                f.write(self.config_text)
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
        self.assertEqual(self.ran(), [])
        self.assertIn("NCCL_SOCKET_NTHREADS=4 on n3 only", r.stderr)
        self.assertIn("(unset) elsewhere", r.stderr)
        self.assertEqual(len([line for line in self.verdict_lines(r) if "n3 only" in line]), 1, r.stderr)
        self.assertTrue(any(line.startswith("gpudiag: fabric: RDMA: n3 cannot use RDMA (no libibverbs.so.1 (tried "
                                            "/nonexistent/libibverbs.so.1") for line in self.verdict_lines(r)), r.stderr)
        rep = self.report()
        self.assertEqual(rep["rdma"]["nodes"]["n1"], {"hca": "mlx5_0:1"})
        self.assertIn("/nonexistent/libibverbs.so.1", rep["rdma"]["nodes"]["n3"]["none"])
        self.assertEqual([(t["from"], t["to"]) for t in rep["tests"] if t["transport"] == "rdma"],
                         [("n1", "n2"), ("n2", "n1")])

    def test_5_a_neighbour_flooding_or_faking_the_listener_gets_a_clear_failure_at_worst(self):
        with ThrowawayUsers("victim", "attacker") as users:
            victim, attacker = users["victim"], users["attacker"]
            os.chown(self.work, victim.uid, victim.gid)
            # On n1, at the rendezvous port the first node's listener uses: fake headers
            # (a wrong token naming n2 and n3), garbage, long lines and silent connections.
            attack = ("import socket, sys, time\n"
                      "addr = (sys.argv[1], int(sys.argv[2])); held = []; end = time.time() + 60\n"
                      "while time.time() < end:\n"
                      "    for msg in (b'gpudiag-fabric ' + b'0' * 32 + b' data 1\\n' + b'x' * 65536,\n"
                      "                b'gpudiag-fabric ' + b'f' * 32 + b' data 2\\n', b'\\x1b[2J' * 4000, None):\n"
                      "        try:\n"
                      "            s = socket.create_connection(addr, timeout=0.5)\n"
                      "            if msg: s.sendall(msg); s.close()\n"
                      "            else: held.append(s)\n"
                      "        except OSError: time.sleep(0.01)\n"
                      "    held = held[-200:]\n")
            p = subprocess.Popen(self.cluster.enter("n1", ["runuser", "-u", attacker.name, "--", PYTHON, "-c", attack,
                                                           self.cluster.addr["n1"], RDZV_PORT]),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                time.sleep(0.5)
                r = self.fabric_step(env={"MASTER_PORT": RDZV_PORT}, user=victim)
            finally:
                os.killpg(p.pid, 9)
                p.wait()
        self.assertLess(r.seconds, 60, "the step waited past the fabric test's deadline")
        if r.returncode == 0:
            # The listener was taken by the attacker's connections at no point that
            # mattered: every pair was measured with the step's own token.
            self.assertEqual(len(self.ran()), 3)
            rep = self.report()
            self.assertEqual(rep["verdict"], "ok")
            self.assertTrue(all("error" not in t for t in rep["tests"]), rep["tests"])
        else:
            self.assertEqual(self.ran(), [], "a program started although the fabric test failed")
            self.assertTrue(self.verdict_lines(r) or "gpudiag: fabric on" in r.stderr, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
