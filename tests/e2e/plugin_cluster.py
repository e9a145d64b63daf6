"""A test case base class: one throwaway Slurm per test class, with gpudiag.so from
the build tree in its plugstack and a copy of etc/gpudiag.yaml that tests may edit."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import SlurmCluster  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build")))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLUGIN = os.path.join(BUILD, "spank", "gpudiag.so")
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch


def plugstack_line(plugin, config, tmp):
    """gpudiag.so's plugstack line for a test cluster: its config cache in the test's own
    dir (removed with it), not the node's /run/gpudiag."""
    return f"required {plugin} config={config} config_cache={os.path.join(tmp, 'config-cache')}\n"


class PluginClusterTest(unittest.TestCase):
    cluster_options = {}  # more SlurmCluster arguments, e.g. node_name
    extra_conf = ()  # more slurm.conf lines, after the plugstack's

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpudiag-plugin-")
        # Tasks may run as other users (--uid): they must be able to enter it.
        os.chmod(cls.tmp, 0o755)
        cls.config = os.path.join(cls.tmp, "gpudiag.yaml")
        shutil.copy(os.path.join(SOURCE, "etc", "gpudiag.yaml"), cls.config)
        plugstack = os.path.join(cls.tmp, "plugstack.conf")
        with open(plugstack, "w") as f:
            f.write(plugstack_line(PLUGIN, cls.config, cls.tmp))
        cls.cluster = SlurmCluster(extra_conf=[f"PlugStackConfig={plugstack}", *cls.extra_conf], **cls.cluster_options)
        cls.cluster.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def srun(self, *args, check=True, timeout=120, env=None, cwd=None, text=True):
        return self.cluster.run(["srun", *args], check=check, timeout=timeout, env=env, cwd=cwd or self.tmp, text=text)

    def srun_as(self, user, *args, check=True, timeout=120, env=None, cwd=None, text=True):
        """srun run by USER (a name): srun, the plugin's srun side and the tasks all run as
        that user. Slurm 24.11 dropped `srun --uid`, so this is how a test runs a step as
        someone else on every release."""
        return self.cluster.run(["runuser", "-u", user, "--", "srun", *args], check=check, timeout=timeout, env=env,
                                cwd=cwd or self.tmp, text=text)


class TwoUsersClusterTest(PluginClusterTest):
    """PluginClusterTest with two real throwaway accounts, cls.victim and cls.attacker,
    removed with their processes whatever happens."""

    @classmethod
    def setUpClass(cls):
        from throwaway_users import ThrowawayUsers
        super().setUpClass()
        try:
            cls.users = ThrowawayUsers("victim", "attacker").__enter__()
        except BaseException:
            super().tearDownClass()
            raise
        cls.victim, cls.attacker = cls.users["victim"], cls.users["attacker"]

    @classmethod
    def tearDownClass(cls):
        cls.users.__exit__(None, None, None)
        super().tearDownClass()
