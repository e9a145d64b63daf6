#pragma once
// A task's part in --diag=fabric (issue 32), between its checks and the preflight
// barrier. Every task says hello to srun (who it is, what it runs with) and waits for
// the end; the node's first task also listens for the other nodes' tests and runs the
// tests srun orders. The listener accepts only the step's token, bounds every read,
// gives up on a silent connection, and is closed before this returns: before the program
// starts. Nothing here waits past `deadline_s`.
#include <string>

#include "fabric/fabric_wire.h"
#include "fabric/nccl_pair.h"

namespace gpudiag::fabric {

struct TaskSide {
  std::string srun_addr;  // $SLURM_LAUNCH_NODE_IPADDR
  Endpoint endpoint;
  TaskHello hello;        // listen_* filled in here for the node's first task
  bool leader = false;    // the node's first task
  std::string listen_addr;  // numeric: the address gloo and NCCL's bootstrap will use
  int listen_port = 0;      // the rendezvous port on the first node; 0: any
  // RDMA (the node's first task): whether to try, the library (fabric.rdma_library, ""
  // for libibverbs.so.1), and the task's NCCL_IB_HCA and NCCL_IB_GID_INDEX.
  bool rdma = true;
  std::string rdma_library, nccl_ib_hca, nccl_ib_gid_index;
  // NCCL (the node's first task): the probe to run, or why this node runs no NCCL pair.
  NcclProbe nccl_probe;
  std::string nccl_none = "no GPU probe given";  // "" : the node takes part
  double deadline_s = 45;
};

struct TaskOutcome {
  enum Kind { kOk, kFail, kNoVerdict } kind = kNoVerdict;
  std::string detail;  // kNoVerdict: why
};

TaskOutcome run_fabric_task(TaskSide side);

// The program a task runs, as far as the layout rules care: "torchrun" for torchrun and
// `python -m torch.distributed.run|launch`, else "".
std::string launcher_of(int argc, const char* const* argv);

}  // namespace gpudiag::fabric
