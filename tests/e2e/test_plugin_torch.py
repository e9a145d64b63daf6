"""Real torch.distributed (Debian's python3-torch, gloo) launched through gpudiag.so
with no MASTER_ADDR, MASTER_PORT or RANK from the user: one task per rank, and one
torchrun per node."""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugin_cluster import PYTHON, PluginClusterTest  # noqa: E402
from tagged import untag  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ALLREDUCE = os.path.join(HERE, "torch_allreduce.py")
TORCHRUN = os.path.join(HERE, "torchrun_shim.py")
CLEAN = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


# torchrun --tee (PET_TEE from the plugin) tags each worker's line: [default<local_rank>]:
WORKER_TAG = re.compile(r"^\[default(\d+)\]:")


def results(stdout):
    rows = {}
    for line in stdout.splitlines():
        line = untag(line)
        m = WORKER_TAG.match(line)
        words = line[m.end() if m else 0:].split()
        if words and words[0] == "allreduce":
            kv = dict(w.split("=", 1) for w in words[1:])
            kv["worker_tag"] = m.group(1) if m else None
            rows[int(kv["rank"])] = kv
    return rows


def torch_without_libuv():
    """True for a torch >= 2.4 built without libuv (Debian 13's 2.6): its TCPStore asks for
    libuv by default, and torchrun's static rendezvous (what PET_MASTER_ADDR selects)
    creates one without reading USE_LIBUV, so torchrun cannot start there at all."""
    probe = ("import torch.distributed as d\n"
             "try:\n d.TCPStore('127.0.0.1', 0, 1, True, use_libuv=True)\n"
             "except TypeError: pass\n"  # torch < 2.4: no such argument, no such default
             "except RuntimeError as e: print('nolibuv' if 'libuv' in str(e) else '')\n")
    return subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=120).stdout.strip() == "nolibuv"


class TorchDistributed(PluginClusterTest):
    def run_clean(self, *args, env=None):
        # Nothing torch-related from the caller's environment: the plugin provides it all.
        return self.cluster.run(["srun", *args], cwd=self.tmp, timeout=300, check=False, env=env,
                                unset=CLEAN)

    def test_one_task_per_rank(self):
        r = self.run_clean("-n4", PYTHON, ALLREDUCE)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        rows = results(r.stdout)
        self.assertEqual(sorted(rows), [0, 1, 2, 3])
        for rank, kv in rows.items():
            self.assertEqual((kv["world"], kv["sum"], kv["local_rank"]), ("4", "10", str(rank)))

    def test_one_torchrun_per_node(self):
        if torch_without_libuv():
            self.skipTest("this torch is built without libuv, and torchrun's static rendezvous needs it "
                          "(Debian 13's python3-torch): torchrun cannot start here, with or without gpudiag")
        # PET_NPROC_PER_NODE comes from the GPUs the task can see.
        r = self.run_clean("-n1", PYTHON, TORCHRUN, ALLREDUCE, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        rows = results(r.stdout)
        self.assertEqual(sorted(rows), [0, 1, 2, 3], r.stdout + r.stderr[-2000:])
        self.assertTrue(all(kv["sum"] == "10" and kv["world"] == "4" for kv in rows.values()))
        # Each worker's lines are whole and carry its own local rank (issue 15.6): the
        # workers share the Slurm task's one pipe and tag.
        for kv in rows.values():
            self.assertEqual(kv["worker_tag"], kv["local_rank"], r.stdout)
        self.assertFalse([line for line in r.stdout.splitlines() if line.count("allreduce") > 1], r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
