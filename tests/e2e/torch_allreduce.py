"""A gloo all_reduce with nothing from the user: env:// finds MASTER_ADDR, MASTER_PORT,
RANK and WORLD_SIZE in the environment (set by gpudiag.so, or by torchrun from the
PET_* that gpudiag.so set). Each rank adds rank+1; the sum is n(n+1)/2."""
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
want = world * (world + 1) / 2
# One write(2) per line: torchrun's workers share one stdout pipe, and print() may
# write the text and its newline separately, interleaving with the other workers.
line = (f"allreduce rank={rank} world={world} local_rank={os.environ.get('LOCAL_RANK')} "
        f"sum={t.item():g} want={want:g} master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
        f"nccl_debug={os.environ.get('NCCL_DEBUG', '-')}\n")
os.write(1, line.encode())
dist.destroy_process_group()
sys.exit(0 if t.item() == want else 1)
