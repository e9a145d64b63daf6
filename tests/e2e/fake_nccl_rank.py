"""Writes what one NCCL 2.21 rank would log into $NCCL_DEBUG_FILE (the plugin sets it
under --diag), so the end-of-step summary can be tested without GPUs. FAULT=rank:kind
(or rank,rank,...:kind) makes those ranks log a known problem."""
import os
import socket

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
host = socket.gethostname().split(".")[0]
pid = os.getpid()
path = os.environ["NCCL_DEBUG_FILE"].replace("%h", host).replace("%p", str(pid))
fault = ""
spec = os.environ.get("FAULT", "")
if spec and str(rank) in spec.split(":")[0].split(","):
    fault = spec.split(":")[1]

o = f"{host}:{pid}:{pid} [{rank}] NCCL INFO "
t = f"{host}:{pid}:{pid + 7} [{rank}] NCCL INFO "
w = f"{host}:{pid}:{pid + 7} [{rank}] transport/net_ib.cc:1696 NCCL WARN "
init = f"ncclCommInitRank comm 0x55d0{rank} rank {rank} nranks {world} cudaDev {rank} nvmlDev {rank} busId 18000 commId 0x6c7e"
lines = [o + "Bootstrap : Using eth0:10.0.0.1<0>", o + "NCCL version 2.21.5+cuda12.4", t + init + " - Init START"]
if fault == "socket_lo":
    lines += [t + "NET/Socket : Using [0]lo:127.0.0.1<0>", t + "Using network Socket"]
elif fault == "no_ib":  # this node's HCAs are not usable: NCCL falls back to TCP
    lines += [t + "NET/IB : No device found.", t + "NET/Socket : Using [0]eth0:10.0.0.1<0>", t + "Using network Socket",
              t + f"Channel 00/0 : {rank}[{rank}] -> {(rank + 1) % world}[{(rank + 1) % world}] [send] via NET/Socket/0"]
else:
    lines += [t + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:10.0.0.1<0>",
              t + "Using network IB"]
lines += [t + f"Channel 00/0 : {rank}[{rank}] -> {(rank + 1) % world}[{(rank + 1) % world}] via P2P/IPC/read",
          t + init + " - Init COMPLETE"]
if fault == "ib12":
    lines.append(w + "NET/IB : Got completion from peer 10.0.0.2<40000> with status=12 opcode=0 len=0 vendor err 129 (Recv)")
with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
if os.environ.get("REMOVE_DIAG_DIR") and rank == 0:
    import shutil
    import time
    time.sleep(0.5)  # let the other ranks write first
    shutil.rmtree(os.environ["GPUDIAG_DIAG_DIR"], ignore_errors=True)
print(f"rank {rank} wrote {path}")
