#!/usr/bin/env python3
"""gpudiag-health's files on a filesystem that does not answer (issue 30 leftover): the
report (--output) and the run state (--state-dir) on an ext4 image that is frozen
(fsfreeze), in a private mount namespace. A write there waits in the kernel,
uninterruptibly, as on a hung NFS mount. Before: gpudiag-health waited with it, and so
did whoever ran it (NHC, slurmd). Now: each write is given up after --write-timeout, the
report comes on stdout, stderr says why, exit 3.

The image is thawed in every case: by the test when it is done, and by a detached
`sleep; fsfreeze -u` in the namespace should the test itself be killed.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import unittest

BUILD = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
HEALTH = os.path.abspath(os.path.join(BUILD, "healthcheck", "gpudiag-health"))
FIXTURES = os.path.abspath(os.path.join(BUILD, "fixtures"))
# Far beyond the 1 s write deadline the test gives: a run that does not return by then
# is one that waits for the filesystem.
RETURN_BY_S = 30
SAFETY_THAW_S = 90


def tools_missing():
    return [t for t in ("unshare", "nsenter", "mkfs.ext4", "fsfreeze", "mount") if not shutil.which(t)]


@unittest.skipUnless(os.geteuid() == 0, "needs root: mount namespaces, loop mounts, fsfreeze")
@unittest.skipIf(tools_missing(), f"missing: {tools_missing()}")
class HungFilesystem(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpudiag-hung-fs-")
        self.img = os.path.join(self.tmp, "fs.img")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)
        with open(self.img, "wb") as f:
            f.truncate(16 << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", self.img], check=True, capture_output=True)
        # A process that only holds the private mount namespace the test works in.
        self.ns = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "infinity"])
        self.in_ns(["mount", "-o", "loop", self.img, self.mnt])
        self.in_ns(["mkdir", "-m", "0755", f"{self.mnt}/out"])
        self.in_ns(["mkdir", "-m", "0700", f"{self.mnt}/state"])
        self.frozen = False
        self.thawer = None

    def in_ns(self, argv, check=True, **kw):
        return subprocess.run(["nsenter", "-t", str(self.ns.pid), "-m", *argv], check=check, capture_output=True,
                              text=True, **kw)

    def freeze(self):
        # Should this test die while the image is frozen, nothing stays stuck for long.
        self.thawer = subprocess.Popen(["nsenter", "-t", str(self.ns.pid), "-m", "sh", "-c",
                                        f"sleep {SAFETY_THAW_S}; fsfreeze -u {self.mnt} 2>/dev/null"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.in_ns(["fsfreeze", "-f", self.mnt])
        self.frozen = True

    def thaw(self):
        if self.frozen:
            self.in_ns(["fsfreeze", "-u", self.mnt], check=False)
            self.frozen = False

    def tearDown(self):
        self.thaw()
        if self.thawer:
            os.killpg(self.thawer.pid, signal.SIGKILL)
            self.thawer.wait()
        self.in_ns(["umount", "-l", self.mnt], check=False)
        self.ns.kill()
        self.ns.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def health(self, *args):
        """gpudiag-health in the namespace; (exit code, stdout, stderr), or None when it
        has not returned within RETURN_BY_S."""
        p = subprocess.Popen(["nsenter", "-t", str(self.ns.pid), "-m", HEALTH, "--fs-root",
                              os.path.join(FIXTURES, "healthy"), "--checks", "ib,xid", "--node", "n", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=RETURN_BY_S)
        except subprocess.TimeoutExpired:
            self.thaw()
            p.communicate()
            return None
        return p.returncode, out, err

    def test_writes_to_a_frozen_filesystem_are_given_up_and_the_report_still_comes(self):
        # Thawed, both files are written: the setup is sound.
        r = self.health("--format", "prometheus", "--output", f"{self.mnt}/out/gpudiag.prom",
                        "--state-dir", f"{self.mnt}/state", "--write-timeout", "1")
        self.assertEqual(r[0], 0, r)
        before = self.in_ns(["cat", f"{self.mnt}/out/gpudiag.prom"]).stdout
        self.assertIn("gpudiag_check_status", before)
        self.assertEqual(r[1], "")

        self.freeze()
        r = self.health("--format", "prometheus", "--output", f"{self.mnt}/out/gpudiag.prom",
                        "--state-dir", f"{self.mnt}/state", "--write-timeout", "1")
        self.assertIsNotNone(r, f"gpudiag-health did not return within {RETURN_BY_S} s while the filesystem "
                                f"of --output and --state-dir was frozen")
        code, out, err = r
        self.assertEqual(code, 3, err)
        self.assertIn("gpudiag_check_status", out)  # the report, on stdout instead
        self.assertIn(f"gpudiag: cannot write {self.mnt}/out/gpudiag.prom: the filesystem gave no answer within 1 s",
                      err)
        self.assertIn(f"gpudiag: cannot write {self.mnt}/state/n.json: the filesystem gave no answer within 1 s", err)
        self.thaw()
        # The children that waited were killed: once thawed, none goes on to replace the
        # file (a temporary file it was creating may be left, under a name no reader takes).
        self.assertEqual(self.in_ns(["cat", f"{self.mnt}/out/gpudiag.prom"]).stdout, before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
