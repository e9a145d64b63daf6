"""A 4-rank gloo job in which rank 3 sleeps forever before it joins: the other ranks
wait in init_process_group, and nobody prints anything more."""
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
print(f"rank {rank} starting", flush=True)
if rank == 3:
    while True:
        time.sleep(3600)
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank} done {t.item()}", flush=True)
