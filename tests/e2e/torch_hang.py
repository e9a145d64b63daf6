"""A 4-rank gloo job in which rank 3 sleeps forever before it joins: the other ranks
wait in init_process_group, and nobody prints anything more. With HEARTBEAT=0,1,...
those ranks keep printing from a thread while they wait (a logger, a progress bar), so
the watchdog of a node that has only such ranks never fires on its own."""
import os
import threading
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
print(f"rank {rank} starting", flush=True)


def heartbeat():
    while True:
        time.sleep(2)
        print(f"rank {rank} still waiting", flush=True)


if str(rank) in os.environ.get("HEARTBEAT", "").split(","):
    threading.Thread(target=heartbeat, daemon=True).start()
if rank == 3:
    while True:
        time.sleep(3600)
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank} done {t.item()}", flush=True)
