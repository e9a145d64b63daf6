"""Prints, as JSON, both names of torch's async-error-handling variable as this task
sees them, and the value torch itself parsed from the pre-2.2 name. Debian 12's torch
1.13 is built without NCCL, but its DDP logger reads NCCL_ASYNC_ERROR_HANDLING for a
process group whose backend is "nccl": a gloo group under that name lets torch's own
parsing be seen on a machine without GPUs."""
import json
import os

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

dist.init_process_group("gloo")
gloo = dist.distributed_c10d._get_default_group()


class NamedNccl(ProcessGroup):
    def getBackendName(self):
        return "nccl"

    def broadcast(self, *a):
        return gloo.broadcast(*a)

    def allreduce(self, *a):
        return gloo.allreduce(*a)

    def allgather(self, *a):
        return gloo.allgather(*a)

    def barrier(self, *a):
        return gloo.barrier(*a)


pg = NamedNccl(dist.get_rank(), dist.get_world_size())
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2), process_group=pg)
logged = model._get_ddp_logging_data()
print(json.dumps({
    "torch": torch.__version__,
    "new": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING"),
    "old": os.environ.get("NCCL_ASYNC_ERROR_HANDLING"),
    "torch_parsed": logged.get("nccl_async_error_handling"),
}))
