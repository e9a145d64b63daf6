"""The hang the verdict is for (issue 31): 6 gloo ranks join, then rank 3 gets stuck in a
function of its own (waiting for a checkpoint that never comes) while the others wait for
it in all_reduce (with GO_FIFO=PATH, blocked in read(2) on that FIFO until a line comes,
then it joins). With HEARTBEAT=0,1,... those ranks keep printing from a thread while they
wait (a logger, a progress bar), so the watchdog of a node that has only such ranks never
fires on its own."""
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


def wait_for_checkpoint():
    while True:
        time.sleep(3600)


def read_the_go(path):
    # Blocked in C (read(2) on a FIFO) until the test writes a line: under
    # hang-action=report the program must still be running afterwards, and then finish.
    with open(path, "rb", buffering=0) as fifo:
        os.read(fifo.fileno(), 1)


def sync_grads(t):
    dist.all_reduce(t)


if str(rank) in os.environ.get("HEARTBEAT", "").split(","):
    threading.Thread(target=heartbeat, daemon=True).start()
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1)
if rank == 3:
    if os.environ.get("GO_FIFO"):
        read_the_go(os.environ["GO_FIFO"])
    else:
        wait_for_checkpoint()
sync_grads(t)
print(f"rank {rank} done {t.item()}", flush=True)
