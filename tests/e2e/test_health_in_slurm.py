"""gpudiag-health's --drain/--resume and the epilog hook, against a real local Slurm."""
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import SlurmCluster  # noqa: E402

BUILD = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEALTH = os.path.abspath(os.path.join(BUILD, "healthcheck", "gpudiag-health"))
FIXTURES = os.path.abspath(os.path.join(BUILD, "fixtures"))
SITE_CONFIG = os.path.join(SOURCE, "etc", "gpudiag.yaml")


def slurm_state(cluster):
    """(State=, Reason= without its [user@time]) as scontrol shows them."""
    text = cluster.show_node()
    state = re.search(r"^   State=(\S+)", text, re.M).group(1)
    reason = re.search(r"^   Reason=(.*?)(?: \[[^\]]*@[^\]]*\])?$", text, re.M)
    return state, reason.group(1) if reason else ""


class SyslogSocket:
    """A syslog stand-in: a Unix datagram socket that logger(1) writes to (-u), as it
    writes to /dev/log; every message received is kept."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        os.chmod(path, 0o666)
        self.sock.setblocking(False)
        self.messages = []

    def read(self):
        while True:
            try:
                self.messages.append(self.sock.recv(65536).decode(errors="replace"))
            except BlockingIOError:
                return self.messages

    def tagged(self, needle):
        """Messages with the syslog tag gpudiag (RFC 3164 `gpudiag:` or RFC 5424 APP-NAME) that contain needle."""
        tag = re.compile(r"^<\d+>(?:1 \S+ \S+ gpudiag |[A-Z][a-z]{2} [ \d]\d [\d:]{8} (?:\S+ )?gpudiag(?:\[\d+\])?: )")
        return [m for m in self.read() if tag.search(m) and needle in m]

    def close(self):
        self.sock.close()


class HealthInSlurm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpudiag-e2e-")
        # The epilog runs with Slurm's minimal environment, so a wrapper supplies what
        # the test needs: our binary, our cluster's slurm.conf, and the fixture to check
        # (read from a file, so a test can switch it without restarting the cluster).
        cls.epilog_fixture = os.path.join(cls.tmp.name, "epilog-fixture")
        with open(cls.epilog_fixture, "w") as f:
            f.write("healthy")
        cls.epilog = os.path.join(cls.tmp.name, "epilog")
        cls.syslog = SyslogSocket(os.path.join(cls.tmp.name, "log.sock"))
        # The site config without the drain breaker's random wait before it counts (up to
        # 2 s a --drain): an admin's DOWN lasts only until slurmd registers again here
        # (ReturnToService=2; on 24.11 within seconds), and a test that waits longer than
        # that sees Slurm, not gpudiag, put the node back in service.
        with open(SITE_CONFIG) as f:
            text = f.read()
        assert "  jitter: 2s\n" in text, "etc/gpudiag.yaml's drain.jitter changed: update this test"
        cls.config = os.path.join(cls.tmp.name, "gpudiag.yaml")
        with open(cls.config, "w") as f:
            f.write(text.replace("  jitter: 2s\n", "  jitter: 0s\n"))
        cls.cluster = SlurmCluster(extra_conf=[f"Epilog={cls.epilog}"])
        cls.cluster.__enter__()
        with open(cls.epilog, "w") as f:
            f.write("#!/bin/sh\n"
                    f"export SLURM_CONF={cls.cluster.conf}\n"
                    f"export GPUDIAG_SYSLOG_SOCKET={cls.syslog.path}\n"
                    f"export GPUDIAG_HEALTH={HEALTH}\n"
                    f"export GPUDIAG_HEALTH_ARGS=\"--config {SITE_CONFIG} --fs-root {FIXTURES}/$(cat {cls.epilog_fixture})\"\n"
                    f"exec {SOURCE}/etc/slurm/gpudiag-epilog\n")
        os.chmod(cls.epilog, 0o755)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.syslog.close()
        cls.tmp.cleanup()

    def setUp(self):
        c = self.cluster
        with open(self.epilog_fixture, "w") as f:
            f.write("healthy")
        if c.node_state() != "IDLE":
            c.resume()
        c.wait_for(lambda: c.node_state() == "IDLE", "node idle before the test")

    def health(self, fixture, *args, env=None, timeout=60):
        argv = [HEALTH, "--fs-root", os.path.join(FIXTURES, fixture), "--config", self.config,
                "--node", self.cluster.node, *args]
        return self.cluster.run(argv, check=False, env=env, timeout=timeout)

    def test_drain_on_down_port(self):
        r = self.health("port-down", "--drain")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        node = self.cluster.show_node()
        self.assertIn("DRAIN", node)
        reason = self.cluster.node_reason()
        self.assertTrue(reason.startswith("gpudiag: "), reason)
        self.assertIn("mlx5_3 port 1 is DOWN", reason)
        self.assertIn("drained: gpudiag:", r.stdout)

    def test_resume_when_healthy_again(self):
        self.assertEqual(self.health("port-down", "--drain").returncode, 2)
        self.assertIn("DRAIN", self.cluster.node_state())
        r = self.health("healthy", "--resume")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("resumed", r.stdout)
        self.cluster.wait_for(lambda: self.cluster.node_state() == "IDLE", "node back to IDLE")

    def test_admin_drain_is_never_touched(self):
        self.cluster.drain("maintenance")
        r = self.health("healthy", "--resume")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("not by gpudiag", r.stdout)
        self.assertIn("DRAIN", self.cluster.node_state())
        self.assertEqual(self.cluster.node_reason(), "maintenance")
        r = self.health("port-down", "--drain")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(self.cluster.node_reason(), "maintenance")

    def test_admin_states_survive_drain_and_resume(self):
        # Issue 15.1: only DRAIN counted as held, so an admin's DOWN node got our drain
        # reason and a later --resume put it back in service. The HealthCheckProgram
        # runs --drain --resume on every node state (HealthCheckNodeState=ANY).
        c = self.cluster
        for state, reason, shown in (("DOWN", "admin: replacing PSU", "DOWN"), ("FAIL", "admin: bad DIMM", "IDLE+FAIL"),
                                     ("DRAIN", "admin: firmware update", "IDLE+DRAIN")):
            with self.subTest(state=state):
                c.run(["scontrol", "update", f"NodeName={c.node}", f"State={state}", f"Reason={reason}"])
                self.assertEqual(slurm_state(c), (shown, reason))
                r = self.health("port-down", "--drain")
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(f"it is {shown} with reason '{reason}'" if state != "DRAIN" else
                              f"drained with reason '{reason}', not by gpudiag", r.stdout)
                self.assertIn("left alone", r.stdout)
                self.assertEqual(slurm_state(c), (shown, reason))
                r = self.health("healthy", "--resume")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertEqual(slurm_state(c), (shown, reason))
                # Both at once, as the HealthCheckProgram runs it.
                self.health("port-down", "--drain", "--resume")
                self.health("healthy", "--drain", "--resume")
                self.assertEqual(slurm_state(c), (shown, reason))
                # An admin on the node is told the same.
                r = self.health("port-down", "--verbose")
                self.assertIn("--drain and --resume will leave it as it is", r.stdout)
                c.resume()
                c.wait_for(lambda: c.node_state() == "IDLE", "node idle again")

    def test_verbose_on_drained_node_explains(self):
        self.health("port-down", "--drain")
        r = self.health("port-down", "--verbose")
        self.assertIn("is drained by gpudiag", r.stdout)
        self.assertIn("gpudiag-health --resume", r.stdout)
        self.assertIn("fix: no link partner", r.stdout)

    def _fake_scontrol(self, body):
        d = tempfile.mkdtemp(dir=self.tmp.name)
        path = os.path.join(d, "scontrol")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)
        config = os.path.join(d, "gpudiag.yaml")
        with open(config, "w") as f:
            f.write("health:\n  scontrol_timeout: 2\ndrain:\n  jitter: 0\n")
        # The breaker's syslog line goes nowhere, not into this host's syslog.
        return {"PATH": d + ":" + os.environ["PATH"], "GPUDIAG_SYSLOG_SOCKET": os.path.join(d, "no-syslog")}, config

    def test_hung_scontrol_is_reported_not_waited_on(self):
        # A duration no other test sleeps: ctest runs tests side by side, and the check below
        # must find this stand-in's process only (a unit test's `sleep 600` once failed it).
        env, config = self._fake_scontrol("exec sleep 600.417\n")
        t0 = time.monotonic()
        r = self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, "port-down"), "--config", config,
                              "--drain"], check=False, env=env, timeout=30)
        elapsed = time.monotonic() - t0
        # A CRITICAL node that cannot count the drains is not drained (issue 33): exit 4.
        self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
        self.assertIn("not drained: held back by the drain breaker, which cannot count", r.stdout)
        self.assertIn("scontrol timed out after 2 s", r.stdout)
        self.assertLess(elapsed, 10)
        # Resuming reads only this node: a hung scontrol there is exit 3.
        r = self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, "healthy"), "--config", config,
                              "--resume"], check=False, env=env, timeout=30)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("scontrol timed out after 2 s", r.stderr)
        # The sleeping stand-in was killed with its process group, not left behind.
        left = subprocess.run(["pgrep", "-f", "sleep 600.417"], capture_output=True, text=True).stdout
        self.assertEqual(left.strip(), "")

    def test_failing_scontrol_is_quoted(self):
        env, config = self._fake_scontrol(
            "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
        r = self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, "port-down"), "--config", config,
                              "--drain"], check=False, env=env, timeout=30)
        self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
        self.assertIn("scontrol exited 1: slurm_load_node error: Unable to contact slurm controller", r.stdout)
        r = self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, "healthy"), "--config", config,
                              "--resume"], check=False, env=env, timeout=30)
        self.assertEqual(r.returncode, 3)
        self.assertIn("scontrol exited 1: slurm_load_node error: Unable to contact slurm controller", r.stderr)

    def test_epilog_drains_after_a_real_job(self):
        with open(self.epilog_fixture, "w") as f:
            f.write("port-down")
        self.cluster.run(["srun", "-n1", "true"], timeout=60)
        self.cluster.wait_for(lambda: "DRAIN" in self.cluster.node_state(), "the epilog to drain the node")
        reason = self.cluster.node_reason()
        self.assertTrue(reason.startswith("gpudiag: mlx5_3 port 1 is DOWN"), reason)
        self.cluster.wait_for(lambda: self.syslog.tagged("gpudiag-health exit 2: gpudiag: mlx5_3 port 1 is DOWN"),
                              "the epilog's log line")
        self.assertRegex(self.syslog.tagged("exit 2")[0], r"epilog for job \d+: gpudiag-health exit 2: .*drained: gpudiag:")

    def test_epilog_leaves_healthy_node_alone(self):
        self.cluster.run(["srun", "-n1", "true"], timeout=60)
        time.sleep(1)
        self.assertEqual(self.cluster.node_state(), "IDLE")


class HealthCheckProgram(unittest.TestCase):
    """Issue 15.4: slurmd itself runs etc/slurm/gpudiag-healthcheck every
    HealthCheckInterval; it drains a sick node, resumes it once healed, leaves an admin's
    DOWN node alone, and logs its failures to syslog with the tag gpudiag."""

    INTERVAL = 2

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpudiag-e2e-")
        cls.fixture = os.path.join(cls.tmp.name, "fixture")
        with open(cls.fixture, "w") as f:
            f.write("healthy")
        cls.syslog = SyslogSocket(os.path.join(cls.tmp.name, "log.sock"))
        cls.wrapper = os.path.join(cls.tmp.name, "healthcheck")
        # ReturnToService=1 (the default) keeps an admin's DOWN node down; the cluster's
        # ReturnToService=2 would have Slurm itself put it back at the next ping.
        cls.cluster = SlurmCluster(extra_conf=[f"HealthCheckProgram={cls.wrapper}",
                                               f"HealthCheckInterval={cls.INTERVAL}", "HealthCheckNodeState=ANY",
                                               "ReturnToService=1"])
        # slurmd runs the program with an almost empty environment: the wrapper gives it
        # our binary, this cluster, the fixture to check (a file, so the test can switch
        # it) and the syslog stand-in, then runs the shipped script.
        with open(cls.wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    f"export SLURM_CONF={cls.tmp.name}/slurm.conf\n"
                    f"export GPUDIAG_HEALTH={HEALTH}\n"
                    f"export GPUDIAG_SYSLOG_SOCKET={cls.syslog.path}\n"
                    f"export GPUDIAG_HEALTH_ARGS=\"--config {SITE_CONFIG} --fs-root {FIXTURES}/$(cat {cls.fixture})\"\n"
                    f"exec {SOURCE}/etc/slurm/gpudiag-healthcheck\n")
        os.chmod(cls.wrapper, 0o755)
        try:
            cls.cluster.__enter__()
            os.symlink(cls.cluster.conf, os.path.join(cls.tmp.name, "slurm.conf"))
        except BaseException:
            cls.syslog.close()
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.syslog.close()
        cls.tmp.cleanup()

    def set_fixture(self, name):
        with open(self.fixture, "w") as f:
            f.write(name)

    def test_drains_when_sick_resumes_when_healed_and_logs(self):
        c = self.cluster
        self.set_fixture("port-down")
        c.wait_for(lambda: "DRAIN" in c.node_state(), "slurmd's health check to drain the node")
        self.assertTrue(c.node_reason().startswith("gpudiag: mlx5_3 port 1 is DOWN"), c.node_reason())
        c.wait_for(lambda: self.syslog.tagged("drained: gpudiag: mlx5_3 port 1 is DOWN"), "the drain in the log")
        logged = self.syslog.tagged("drained: gpudiag: mlx5_3 port 1 is DOWN")[0]
        self.assertIn("HealthCheckProgram: gpudiag-health exit 2: gpudiag: mlx5_3 port 1 is DOWN", logged)
        self.assertNotIn("\n", logged.rstrip("\n"))
        self.set_fixture("healthy")
        c.wait_for(lambda: c.node_state() == "IDLE", "slurmd's health check to resume the node")
        c.wait_for(lambda: self.syslog.tagged("resumed: it was drained by gpudiag"), "the resume in the log")

    def test_admin_down_node_stays_down_and_the_log_says_why(self):
        c = self.cluster
        c.run(["scontrol", "update", f"NodeName={c.node}", "State=DOWN", "Reason=admin: replacing PSU"])
        try:
            self.set_fixture("port-down")
            c.wait_for(lambda: self.syslog.tagged("it is DOWN with reason 'admin: replacing PSU'"),
                       "a health check run on the DOWN node")
            self.assertEqual(slurm_state(c), ("DOWN", "admin: replacing PSU"))
            self.set_fixture("healthy")
            time.sleep(2 * self.INTERVAL + 1)  # two more runs, on a healthy node now
            self.assertEqual(slurm_state(c), ("DOWN", "admin: replacing PSU"))
        finally:
            self.set_fixture("healthy")
            c.resume()
            c.wait_for(lambda: c.node_state() == "IDLE", "node idle again")

    def test_missing_binary_is_logged(self):
        with open(os.path.join(self.tmp.name, "missing"), "w") as f:
            f.write("#!/bin/sh\nexport GPUDIAG_HEALTH=/nonexistent/gpudiag-health\n"
                    f"export GPUDIAG_SYSLOG_SOCKET={self.syslog.path}\nexec {SOURCE}/etc/slurm/gpudiag-healthcheck\n")
        r = subprocess.run(["sh", os.path.join(self.tmp.name, "missing")], capture_output=True, text=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin"})
        self.assertEqual(r.returncode, 0)
        self.assertTrue(self.syslog.tagged("/nonexistent/gpudiag-health is missing or not executable"),
                        self.syslog.read()[-3:])


class ReasonTextElsewhere(unittest.TestCase):
    """Issue 21.9: text in another field that looks like ` Reason=gpudiag: ...` decides
    nothing. The kernel's version string is printed (OS=) before Reason=; this slurmd
    reports one that holds such text, through a uname() shim preloaded into slurmd only
    (a custom kernel build can carry any version string)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpudiag-e2e-")
        src = os.path.join(cls.tmp.name, "uname_shim.c")
        with open(src, "w") as f:
            f.write("#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
                    "#include <sys/utsname.h>\n"
                    "int uname(struct utsname *u) {\n"
                    "  int (*real)(struct utsname *) = (int (*)(struct utsname *))dlsym(RTLD_NEXT, \"uname\");\n"
                    "  int r = real(u);\n"
                    "  const char *v = getenv(\"GPUDIAG_TEST_UNAME_VERSION\");\n"
                    "  if (r == 0 && v) snprintf(u->version, sizeof u->version, \"%s\", v);\n"
                    "  return r;\n}\n")
        cls.shim = os.path.join(cls.tmp.name, "uname_shim.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", cls.shim, src, "-ldl"], check=True)
        cls.cluster = SlurmCluster(slurmd_env={"LD_PRELOAD": cls.shim,
                                               "GPUDIAG_TEST_UNAME_VERSION": "#1 SMP Reason=gpudiag: kernel text"})
        try:
            cls.cluster.__enter__()
        except BaseException:
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.tmp.cleanup()

    def setUp(self):
        c = self.cluster
        if c.node_state() != "IDLE":
            c.resume()
        c.wait_for(lambda: c.node_state() == "IDLE", "node idle before the test")

    def health(self, fixture, *args):
        return self.cluster.run([HEALTH, "--fs-root", os.path.join(FIXTURES, fixture), "--config", SITE_CONFIG,
                                 "--node", self.cluster.node, *args], check=False, timeout=60)

    def update(self, *fields):
        self.cluster.run(["scontrol", "update", f"NodeName={self.cluster.node}", *fields])

    def test_kernel_version_text_is_not_the_reason(self):
        self.assertRegex(self.cluster.show_node(), r"\n   OS=Linux \S+ #1 SMP Reason=gpudiag: kernel text")
        self.cluster.drain("maintenance")
        r = self.health("healthy", "--resume")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("drained with reason 'maintenance', not by gpudiag", r.stdout)
        self.assertEqual(slurm_state(self.cluster), ("IDLE+DRAIN", "maintenance"))

    def test_comment_and_extra_text_is_not_the_reason(self):
        self.update("Comment=see Reason=gpudiag: comment text", "Extra=x Reason=gpudiag: extra text")
        try:
            self.cluster.drain("maintenance")
            self.assertEqual(self.health("healthy", "--resume").returncode, 0)
            self.assertEqual(slurm_state(self.cluster), ("IDLE+DRAIN", "maintenance"))
        finally:
            self.update("Comment=", "Extra=")

    def test_a_comment_that_imitates_fields_is_refused(self):
        # Slurm prints a comment's line breaks as they are: its lines look like fields.
        self.update("Comment=a\n   Reason=gpudiag: imitated\n   State=IDLE")
        try:
            self.cluster.drain("maintenance")
            r = self.health("healthy", "--resume")
            self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
            self.assertIn(f"gpudiag: scontrol show node {self.cluster.node}: Reason= appears more than once", r.stderr)
            self.assertEqual(slurm_state(self.cluster)[0], "IDLE+DRAIN")
            self.assertIn("maintenance", self.cluster.node_reason())
        finally:
            self.update("Comment=")


if __name__ == "__main__":
    unittest.main(verbosity=2)
