#!/usr/bin/python3
"""The demo's Slurm part: a throwaway one-node Slurm (munge, slurmctld, slurmd) with
gpudiag.so in its plugstack; `srun --diag` on a 4-rank torch.distributed job (gloo),
then gpudiag-health run through Slurm on this node. Slurm lives in a temp dir and is torn
down at the end; the job's own dir (BUILD_DIR/demo-run, with the diag dir the tasks made)
is kept for the user to look at, and emptied at the next demo.

Usage: scripts/demo_slurm.py BUILD_DIR [--node-name NAME]

--node-name gives the node a NodeName that resolves nowhere (NodeAddr stays 127.0.0.1), as
in a fresh container or chroot whose host name is in no hosts file: the torch job must
work there too, since gpudiag.so hands it the address Slurm reaches the node by."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from slurm_cluster import SlurmCluster  # noqa: E402


def show(cluster, argv, cwd):
    print("$ " + " ".join(argv), flush=True)
    r = subprocess.run(argv, env=cluster.env, cwd=cwd)
    print(f"(exit code {r.returncode})\n", flush=True)
    return r.returncode


def main():
    args = sys.argv[1:]
    node_name = None
    if "--node-name" in args:
        i = args.index("--node-name")
        if i + 1 >= len(args):
            sys.exit("gpudiag: demo_slurm.py: --node-name needs a name")
        node_name = args[i + 1]
        del args[i:i + 2]
    build = os.path.abspath(args[0] if args else os.path.join(ROOT, "build"))
    work = os.path.join(build, "demo-run")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chmod(work, 0o755)
    plugstack = os.path.join(work, "plugstack.conf")
    with open(plugstack, "w") as f:
        f.write(f"required {build}/spank/gpudiag.so config={ROOT}/etc/gpudiag.yaml\n")
    print(f"== a throwaway one-node Slurm, gpudiag.so in {plugstack}", flush=True)
    with SlurmCluster(extra_conf=[f"PlugStackConfig={plugstack}"], node_name=node_name) as c:
        print(f"node {c.node} is idle\n")
        print("== srun --diag on a 4-rank torch.distributed all_reduce (gloo); the user sets no\n"
              "   MASTER_ADDR, MASTER_PORT or RANK: gpudiag.so does, and tags each line [host:rank]")
        rc = show(c, ["srun", "-n4", "--diag", "/usr/bin/python3", os.path.join(ROOT, "tests", "e2e",
                                                                                  "torch_allreduce.py")], work)
        diag = [os.path.relpath(os.path.join(work, d)) for d in os.listdir(work) if d.startswith("gpudiag-")]
        print(f"diag dir made by the tasks, as the user, and kept: {', '.join(diag) or '(none)'}\n"
              "(NCCL writes nccl.<host>.<pid>.log there on GPU nodes; gloo on this CPU-only node writes none)\n")
        print("== gpudiag-health on this node, run as a Slurm step")
        show(c, ["srun", "-n1", os.path.join(build, "healthcheck", "gpudiag-health"), "--checks", "ib,acs,iommu,gpu"],
             work)
    return rc


if __name__ == "__main__":
    sys.exit(main())
