"""What the multi-node benches share: the plugin from a build tree, a throwaway config and
plugstack in a temporary directory, the multi-node test cluster
(tests/e2e/multinode_cluster.py) reading that plugstack, and launches interleaved round by
round, so every contender runs on the same cluster under the same load."""
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, HERE)
from multinode_cluster import MultiNodeCluster  # noqa: E402
from plugin_relay import timed  # noqa: E402


# Config variants of etc/gpudiag.yaml (write_config's `replace`) the benches compare: no relay
# (`plugin.prefix: never`: no relay thread, no handoff), no IB scan (no `NCCL_IB_HCA: auto`),
# no torchrun variables (`plugin.torchrun_env: false`: 6 fewer per task).
NORELAY = [("\n  prefix: auto", "\n  prefix: never")]
NOIB = [("\n    NCCL_IB_HCA: auto", "")]
NOTORCHRUN = [("\n  torchrun_env: true", "\n  torchrun_env: false")]
VARIANTS = {"": (), "norelay": NORELAY, "noib": NOIB, "notorchrun": NOTORCHRUN}


ENV_FLOOR_SRC = os.path.join(HERE, "env_floor_spank.c")
TAG_RE = re.compile(r"^\[[^\]\s]*:\d+\] ")


def build_env_floor(directory):
    """bench/env_floor_spank.c built into directory; returns the .so's path."""
    out = os.path.join(directory, "env_floor_spank.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", out, ENV_FLOOR_SRC], check=True)
    return out


def plugin_path(build):
    plugin = os.path.abspath(os.path.join(build, "spank", "gpudiag.so"))
    if not os.path.exists(plugin):
        sys.exit(f"bench: {plugin} not found: build first (./scripts/build)")
    return plugin


def write_config(directory, name, replace=(), append=""):
    """A copy of etc/gpudiag.yaml as directory/name.yaml, with each (old, new) of `replace`
    applied and `append` added at its end; returns its path."""
    with open(os.path.join(ROOT, "etc", "gpudiag.yaml")) as f:
        text = f.read()
    for old, new in replace:
        if old not in text:
            raise RuntimeError(f"bench: etc/gpudiag.yaml has no {old!r}")
        text = text.replace(old, new)
    text += append
    path = os.path.join(directory, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


class MultiNodeBench:
    """`with MultiNodeBench(build, name) as b:` a 3-node cluster whose plugstack b.use(mode)
    switches: mode None is an empty plugstack, a mode of b.config(...) loads gpudiag.so with
    that config. srun and slurmstepd read the plugstack at every launch."""

    def __init__(self, build, name, nodes=3):
        self.plugin = plugin_path(build)
        self.nodes = nodes
        self.dir = tempfile.mkdtemp(prefix=f"gpudiag-bench-{name}-")
        os.chmod(self.dir, 0o755)
        self.plugstack = os.path.join(self.dir, "plugstack.conf")
        self.cluster = None

    def config(self, name, replace=(), append=""):
        """A copy of etc/gpudiag.yaml (write_config) in the bench's directory; returns a mode."""
        return f"required {self.plugin} config={write_config(self.dir, name, replace, append)}\n"

    def modes(self, items):
        """name -> plugstack mode of each NAME=PATH/gpudiag.so[@VARIANT] (VARIANTS); raises
        ValueError for a missing file or an unknown variant."""
        out = {}
        for item in items:
            name, _, rest = item.partition("=")
            path, _, variant = rest.partition("@")
            if not name or not path or not os.path.exists(path):
                raise ValueError(f"{item}: give NAME=PATH to an existing gpudiag.so")
            if variant not in VARIANTS:
                raise ValueError(f"{item}: no variant {variant!r} (there are: {', '.join(v for v in VARIANTS if v)})")
            cfg = write_config(self.dir, variant or "gpudiag", VARIANTS[variant])
            out[name] = f"required {os.path.abspath(path)} config={cfg}\n"
        return out

    def task_env_added(self, mode, step):
        """NAME=VALUE of each variable that task 0 of `step` (an srun argv without the
        program) has under plugstack `mode` and lacks under none, in the order env prints."""
        def env_of(m):
            self.use(m)
            r = self.cluster.run([*step, "/bin/sh", "-c", '[ "$SLURM_PROCID" != 0 ] || exec env'], cwd=self.dir)
            pairs = (TAG_RE.sub("", line).partition("=") for line in r.stdout.splitlines())
            return {k: v for k, eq, v in pairs if eq and k.isidentifier()}
        plain, got = env_of(None), env_of(mode)
        return [f"{k}={v}" for k, v in got.items() if k not in plain]

    def env_floor(self, floor_so, mode, step):
        """A plugstack mode loading the env floor (build_env_floor) with the variables
        gpudiag gives task 0 of `step` under `mode`; returns (mode, their count). A value
        with white space (which a plugstack line cannot carry) becomes as many '_'."""
        added = [re.sub(r"\s", "_", kv) for kv in self.task_env_added(mode, step)]
        return f"required {floor_so} {' '.join(added)}\n", len(added)

    def use(self, mode):
        with open(self.plugstack, "w") as f:
            f.write(mode or "")

    def __enter__(self):
        self.use(None)
        try:
            self.cluster = MultiNodeCluster(nodes=self.nodes, extra_conf=[f"PlugStackConfig={self.plugstack}"])
            self.cluster.__enter__()
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc):
        try:
            return self.cluster.__exit__(*exc)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, argv):
        """(wall s, whole-machine CPU s, stdout bytes) of argv run on the login node."""
        return timed(self.cluster, self.cluster.enter(self.cluster.login, argv, cwd=self.dir))

    def interleave(self, ways, rounds, warmup=2, shuffle=False):
        """ways: name -> (mode, argv). Each round runs every way once, in order (shuffle:
        in a new random order each round, so no way always follows the same one); returns
        name -> [(wall, cpu, bytes)] of the measured rounds."""
        for _ in range(warmup):  # first launches load plugins and page in binaries
            for mode, argv in ways.values():
                self.use(mode)
                self.run(argv)
        rows = {w: [] for w in ways}
        order = list(ways)
        for _ in range(rounds):
            if shuffle:
                random.shuffle(order)
            for w in order:
                mode, argv = ways[w]
                self.use(mode)
                try:
                    rows[w].append(self.run(argv))
                except RuntimeError as e:
                    raise RuntimeError(f"bench: way {w!r}: {e}") from None
        return rows


def median_ms(rows, field=0):
    return statistics.median(r[field] for r in rows) * 1000


def mean_ms(rows, field=0):
    return statistics.mean(r[field] for r in rows) * 1000
