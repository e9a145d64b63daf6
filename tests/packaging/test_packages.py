"""The packages as an admin gets them: build the .deb and .rpm, check their file lists,
dependencies and lintian, then install the .deb with dpkg -i and use the installed
files: a real Slurm loads the plugin from its installed path through a plugstack
include, srun --diag works, and /usr/sbin/gpudiag-health --quick runs. The package is
purged at the end."""
import glob
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(SOURCE, "build")))
sys.path.insert(0, os.path.join(SOURCE, "tests", "e2e"))
from slurm_cluster import SlurmCluster, slurm_version  # noqa: E402

MAJOR, MINOR = slurm_version()
# The release range the packages must pin: this Slurm's major.minor, zero-padded as
# Debian's versions are ("22.05.8-4", "24.11.5-4").
LOW, HIGH = f"{MAJOR}.{MINOR:02d}", f"{MAJOR}.{MINOR + 1:02d}"

PLUGIN = "/usr/lib/x86_64-linux-gnu/slurm-wlm/gpudiag.so"
YAML_READER = "/usr/lib/x86_64-linux-gnu/slurm-wlm/gpudiag_yaml.so"  # beside the plugin, loaded on a cache miss
DEB_FILES = {
    YAML_READER,
    "/etc/gpudiag/gpudiag.yaml", "/etc/slurm/plugstack.conf.d/gpudiag.conf", "/etc/nhc/scripts/gpudiag.nhc",
    "/usr/bin/gpudiag", PLUGIN, "/usr/libexec/gpudiag/gpudiag-gpu-probe", "/usr/sbin/gpudiag-health",
    "/usr/share/doc/gpudiag/changelog.Debian.gz", "/usr/share/doc/gpudiag/copyright",
    "/usr/share/doc/gpudiag/examples/gpudiag-epilog", "/usr/share/doc/gpudiag/examples/gpudiag-healthcheck",
    "/usr/share/lintian/overrides/gpudiag", "/usr/share/man/man8/gpudiag-health.8.gz",
    "/usr/share/man/man8/gpudiag.8.gz",
}
CONFFILES = {"/etc/gpudiag/gpudiag.yaml", "/etc/slurm/plugstack.conf.d/gpudiag.conf", "/etc/nhc/scripts/gpudiag.nhc"}
RPM_FILES = (DEB_FILES - {PLUGIN, YAML_READER, "/usr/share/doc/gpudiag/changelog.Debian.gz",
                          "/usr/share/lintian/overrides/gpudiag"}) | {
    "/usr/lib64/slurm/gpudiag.so", "/usr/lib64/slurm/gpudiag_yaml.so", "/usr/share/doc/gpudiag/examples"}


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


class Packages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        r = run([os.path.join(SOURCE, "packaging", "build-packages"), BUILD])
        if r.returncode != 0:
            raise RuntimeError("packaging/build-packages failed:\n" + r.stdout + r.stderr)
        cls.deb = glob.glob(os.path.join(BUILD, "packages", "gpudiag_*_amd64.deb"))[0]
        rpms = glob.glob(os.path.join(BUILD, "packages", "gpudiag-*.x86_64.rpm"))
        cls.rpm = rpms[0] if rpms else None

    def test_deb_is_named_for_its_slurm_release(self):
        self.assertRegex(os.path.basename(self.deb), rf"^gpudiag_[0-9.]+-1\+slurm{LOW}_amd64\.deb$")

    def test_deb_file_list_and_control(self):
        listing = run(["dpkg-deb", "-c", self.deb]).stdout
        files = {line.split()[-1].lstrip(".") for line in listing.splitlines() if not line.startswith("d")}
        self.assertEqual(files, DEB_FILES)
        depends = run(["dpkg-deb", "-f", self.deb, "Depends"]).stdout
        for dep in (f"slurm-client (>= {LOW})", f"slurm-client (<< {HIGH})", "libhwloc15", "libibverbs1"):
            self.assertIn(dep, depends)
        self.assertRegex(depends, r"libyaml-cpp0\.\d+")
        for absent in ("cuda", "nccl", "nvidia"):
            self.assertNotIn(absent, depends.lower())
        with tempfile.TemporaryDirectory() as d:
            run(["dpkg-deb", "-e", self.deb, d])
            with open(os.path.join(d, "conffiles")) as f:
                self.assertEqual(set(f.read().split()), CONFFILES)
        # The plugstack snippet is shipped disabled.
        with tempfile.TemporaryDirectory() as d:
            run(["dpkg-deb", "-x", self.deb, d])
            with open(os.path.join(d, "etc/slurm/plugstack.conf.d/gpudiag.conf")) as f:
                active = [line for line in f if line.strip() and not line.lstrip().startswith("#")]
            self.assertEqual(active, [])

    def test_licensed_apache_2(self):
        # The project's LICENSE, the .deb's machine-readable copyright and the .rpm's tag agree.
        with open(os.path.join(SOURCE, "LICENSE")) as f:
            self.assertIn("Apache License\n                           Version 2.0", f.read())
        with tempfile.TemporaryDirectory() as d:
            run(["dpkg-deb", "-x", self.deb, d])
            with open(os.path.join(d, "usr/share/doc/gpudiag/copyright")) as f:
                text = f.read()
        self.assertRegex(text, r"(?m)^License: Apache-2\.0$")
        self.assertIn("/usr/share/common-licenses/Apache-2.0", text)
        if self.rpm:
            self.assertEqual(run(["rpm", "-qp", "--qf", "%{LICENSE}", self.rpm]).stdout, "Apache-2.0")

    def test_lintian_is_clean(self):
        r = run(["lintian", "--fail-on", "error,warning", self.deb])
        tags = [line for line in r.stdout.splitlines() if line[:2] in ("E:", "W:")]
        self.assertEqual(tags, [], r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_rpm_file_list_and_requires(self):
        if not self.rpm:
            self.skipTest("rpmbuild is not installed here (the Debian 13 root): the .rpm is built and checked on Debian 12")
        files = set(run(["rpm", "-qpl", self.rpm]).stdout.split())
        self.assertEqual(files, RPM_FILES)
        requires = run(["rpm", "-qpR", self.rpm]).stdout
        for req in (f"slurm >= {LOW}", f"slurm < {HIGH}", "yaml-cpp", "hwloc-libs", "libibverbs"):
            self.assertIn(req, requires)
        for absent in ("cuda", "nccl", "nvidia"):
            self.assertNotIn(absent, requires.lower())
        self.assertEqual(set(run(["rpm", "-qpc", self.rpm]).stdout.split()), CONFFILES)
        # The plugstack snippet points at RPM's plugin dir.
        with tempfile.TemporaryDirectory() as d:
            cpio = subprocess.run(f"rpm2cpio {self.rpm} | cpio -idm --quiet", shell=True, cwd=d, capture_output=True)
            self.assertEqual(cpio.returncode, 0, cpio.stderr)
            with open(os.path.join(d, "etc/slurm/plugstack.conf.d/gpudiag.conf")) as f:
                self.assertIn("# required /usr/lib64/slurm/gpudiag.so", f.read())

    @unittest.skipUnless(os.geteuid() == 0, "dpkg -i needs root")
    def test_installed_package_works(self):
        # Never replace, then purge, a gpudiag the machine's admin installed.
        if run(["dpkg-query", "-W", "-f=${Status}", "gpudiag"]).stdout.startswith("install"):
            self.skipTest("gpudiag is already installed on this machine: not touching it (dpkg --purge gpudiag to run this)")
        r = run(["dpkg", "-i", self.deb])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        try:
            self._use_installed()
        finally:
            r = run(["dpkg", "--purge", "gpudiag"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertFalse(os.path.exists(PLUGIN))

    def _use_installed(self):
        health = run(["/usr/sbin/gpudiag-health", "--quick"])
        self.assertIn(health.returncode, (0, 1, 2, 3), health.stderr)
        self.assertTrue(health.stdout.startswith("gpudiag-health on "), health.stdout + health.stderr)
        self.assertNotIn("config", health.stderr)  # the installed /etc/gpudiag/gpudiag.yaml parses
        probe = run(["/usr/libexec/gpudiag/gpudiag-gpu-probe", "devices"])
        self.assertEqual(probe.returncode, 0)
        self.assertIn('"probe":"devices"', probe.stdout)
        # The admin's step: enable the shipped line, in a plugstack.conf.d that
        # plugstack.conf includes.
        with tempfile.TemporaryDirectory(prefix="gpudiag-pkg-") as tmp:
            os.chmod(tmp, 0o755)
            confd = os.path.join(tmp, "plugstack.conf.d")
            os.mkdir(confd)
            with open("/etc/slurm/plugstack.conf.d/gpudiag.conf") as f:
                enabled = [line.lstrip("# ") for line in f if line.startswith("# required ")]
            self.assertEqual(len(enabled), 1)
            self.assertIn(PLUGIN, enabled[0])
            with open(os.path.join(confd, "gpudiag.conf"), "w") as f:
                f.write(enabled[0])
            plugstack = os.path.join(tmp, "plugstack.conf")
            with open(plugstack, "w") as f:
                f.write(f"include {confd}/*.conf\n")
            with SlurmCluster(extra_conf=[f"PlugStackConfig={plugstack}"]) as cluster:
                r = cluster.run(["srun", "-n2", "--diag", "/bin/sh", "-c", "echo debug=$NCCL_DEBUG rank=$RANK"],
                                cwd=tmp, timeout=60)
                lines = sorted(r.stdout.splitlines())
                self.assertEqual(lines, [f"[{cluster.node}:0] debug=INFO rank=0", f"[{cluster.node}:1] debug=INFO rank=1"],
                                 r.stdout + r.stderr)
                self.assertIn("gpudiag: no NCCL logs in", r.stderr)
                bad = cluster.run(["srun", "--diag=bogus", "true"], cwd=tmp, check=False, timeout=60)
                self.assertNotEqual(bad.returncode, 0)
                self.assertIn("unknown item 'bogus'", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
