#!/usr/bin/env python3
"""Issue 30.2 as it was found: a real unprivileged user makes the kernel itself log an
NVIDIA Xid of their choosing, and root's gpudiag-health reads the real /dev/kmsg.

The kernel's segfault line ends with the name of the file mapped at the faulting
address, and starts with the process name: the user names a file as the driver's Xid
line, maps it without PROT_EXEC, jumps into it (and sets the process name to the
driver's prefix, cut to 15 bytes). Before the fix, `gpudiag-health --checks xid` found
"NVRM: Xid (" inside that line and reported Xid 79 CRITICAL (HealthCheckProgram drains
the node, the run state holds it until reboot). The user also tries /dev/kmsg, which
the kernel refuses them, and root's own write there gets LOG_USER: neither is the
driver.

The forged records stay in this machine's kernel log (nothing can remove one). The
other tests read fixtures through --fs-root; the one that reads the real log
(StateChecks.TheRealKernelLog) holds either way, and each record names this test.
"""
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throwaway_users import ThrowawayUsers  # noqa: E402

BUILD = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
HEALTH = os.path.abspath(os.path.join(BUILD, "healthcheck", "gpudiag-health"))

# Maps argv[1] (a file it creates) readable but not executable and calls into it, so
# the kernel logs "COMM[PID]: segfault at ... in FILE[...]". argv[2]: a process name.
JUMP = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if sys.argv[2]:
    libc.prctl(15, sys.argv[2].encode(), 0, 0, 0)  # PR_SET_NAME
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
os.ftruncate(fd, 4096)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
addr = libc.mmap(None, 4096, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
ctypes.CFUNCTYPE(None)(addr)()
"""

# What a user may write to /dev/kmsg: refused to them (0644 root) and tried anyway.
TRY_KMSG = r"""
import sys
try:
    open("/dev/kmsg", "w").write(sys.argv[1] + "\n")
    print("written")
except OSError as e:
    print("refused", e.errno)
"""


def kernel_log():
    """Every record /dev/kmsg holds now, as (prio, message)."""
    out = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                rec = os.read(fd, 16384)
            except BlockingIOError:
                break
            except BrokenPipeError:  # overwritten while read
                continue
            if not rec:
                break
            head, _, msg = rec.decode("utf-8", "replace").split("\n", 1)[0].partition(";")
            out.append((int(head.split(",")[0]), msg))
    finally:
        os.close(fd)
    return out


@unittest.skipUnless(os.geteuid() == 0, "needs root: throwaway users and reading /dev/kmsg")
class ForgedXid(unittest.TestCase):
    def setUp(self):
        with open("/proc/sys/debug/exception-trace") as f:
            if f.read().strip() != "1":
                self.skipTest("debug.exception-trace is not 1: this kernel does not log segfaults")
        self.token = "gpudiag-e2e-forgery-" + secrets.token_hex(4)
        self.xid = f"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name={self.token}, GPU has fallen off the bus."
        self.state = tempfile.mkdtemp(prefix="gpudiag-forged-xid-state-")
        os.chmod(self.state, 0o700)

    def tearDown(self):
        shutil.rmtree(self.state, ignore_errors=True)

    def health_xid(self):
        r = subprocess.run([HEALTH, "--checks", "xid", "--format", "json", "--state-dir", self.state,
                            "--node", "forged-xid-e2e"], capture_output=True, text=True, timeout=60)
        report = json.loads(r.stdout)
        return r.returncode, next(c for c in report["checks"] if c["name"] == "xid")

    def test_a_user_cannot_make_the_kernel_log_an_xid(self):
        with ThrowawayUsers("attacker") as users:
            attacker = users["attacker"]
            for comm in ("", self.xid[:15]):
                r = attacker.run(["/usr/bin/python3", "-c", JUMP, os.path.join(attacker.home, self.xid), comm])
                self.assertIn(r.returncode, (139, -11), r.stderr)
            r = attacker.run(["/usr/bin/python3", "-c", TRY_KMSG, self.xid], check=True)
            self.assertTrue(r.stdout.startswith("refused"), r.stdout)
        # Root's own write (systemd, a logger, an admin) is userspace too.
        with open("/dev/kmsg", "w") as f:
            f.write("<4>" + self.xid + "\n")

        ours = [(prio, msg) for prio, msg in kernel_log() if self.token in msg]
        segfaults = [m for p, m in ours if "segfault at" in m and p < 8]
        if not segfaults:
            self.skipTest("the kernel logged no segfault line (printk ratelimit?): nothing to test")
        # The attack worked as far as the kernel goes: it wrote the forged line itself.
        self.assertTrue(any(m.startswith(self.xid[:15] + "[") for m in segfaults), ours)
        self.assertIn((12, self.xid), ours)

        code, xid = self.health_xid()
        self.assertEqual(xid["status"], "ok", json.dumps(xid, indent=1))
        self.assertEqual(code, 0, json.dumps(xid, indent=1))
        self.assertEqual([f for f in xid["findings"] if f["subject"] != "kmsg"], [], json.dumps(xid, indent=1))
        self.assertNotIn("Xid 79", json.dumps(xid))
        # Nothing is held for the next run either.
        with open(os.path.join(self.state, "forged-xid-e2e.json")) as f:
            self.assertEqual(json.load(f)["checks"]["xid"]["held"], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
