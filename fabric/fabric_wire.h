#pragma once
// What the step's tasks and srun say to each other during --diag=fabric (issue 32), and
// the header of a test connection between two nodes. srun coordinates (ARCHITECTURE §3a):
// it listens on an ephemeral port and hands `port:token` to the tasks in SLURM_GPUDIAG_FABRIC,
// as the preflight barrier does. Every line is bounded and carries nothing a terminal
// could take as a control sequence; every parser is pure and fuzzed (fuzz_fabric_wire).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fabric/qp_info.h"
#include "util/step_token.h"

namespace gpudiag::fabric {

inline constexpr const char* kFabricEnv = "SLURM_GPUDIAG_FABRIC";
inline constexpr std::size_t kHelloMax = 64 * 1024;  // a task's hello, newline included
inline constexpr std::size_t kLineMax = 512;         // any other line
inline constexpr std::size_t kTokenHex = kStepTokenHex;

// `port:token:proof`. The tasks show the token; srun's first line to each task shows the
// proof, which no task sends: whoever holds srun's port once it has closed it (another
// user who bound it) reads the tasks' hellos, token and all, but cannot give orders
// (adversary review 14, as for the preflight barrier).
struct Endpoint {
  int port = 0;
  std::string token;  // 32 lowercase hex digits
  std::string proof;  // 32 lowercase hex digits
};
std::string format_endpoint(const Endpoint& e);
std::optional<Endpoint> parse_endpoint(const std::string& value);
// srun's first line to a task that said hello: "srun PROOF".
std::string format_srun_proof(const std::string& proof);
bool is_srun_proof(const std::string& line, const std::string& proof);  // constant time

// What the node that NCCL and torch meet looks like (the node's first task gathers it).
struct NodeFacts {
  std::string driver;     // /proc/driver/nvidia/version's version, "" without a driver
  std::string kernel;     // uname -r
  std::string rdma_core;  // libibverbs' version ("" without)
  std::vector<std::string> hcas;        // /sys/class/infiniband
  std::vector<std::string> interfaces;  // /sys/class/net
};

// One task's hello: who it is, what it will run with, and (the node's first task) where
// its node's listener is.
struct TaskHello {
  std::uint32_t rank = 0;
  std::uint32_t node_id = 0;
  std::uint32_t nnodes = 1;
  std::uint32_t local_rank = 0;
  std::uint32_t local_tasks = 1;
  std::string node;  // short host name: one printable word
  std::string launcher;  // "torchrun" when the task's program is torchrun, else ""
  // Effective NCCL_*, GLOO_*, TORCH_*, CUDA_* and the layout's variables (WORLD_SIZE,
  // PET_NNODES, PET_NPROC_PER_NODE, SLURM_GPUS_ON_NODE), and which of them gpudiag set.
  std::map<std::string, std::string> env;
  std::set<std::string> injected;
  // The first task of a node:
  std::string listen_addr;  // numeric; "" when this task has no listener
  int listen_port = 0;
  std::string listen_error;  // why there is none, or why not on the rendezvous port
  std::optional<NodeFacts> facts;
  // RDMA (the node's first task): the HCA port it tests with ("mlx5_0:1"), or why none
  // ("no libibverbs.so.1", "no active port NCCL_IB_HCA selects").
  std::string rdma_hca;
  std::string rdma_none;
  // NCCL (the node's first task): whether it can run a pair through the GPU probe, or why not.
  bool nccl = false;
  std::string nccl_none;
};
std::string format_hello(const std::string& token, const TaskHello& h);
// `line` without its newline. The token is checked before the rest is parsed.
std::optional<TaskHello> parse_hello(const std::string& line, const std::string& token);

// A node's first task reports what its tests did.
struct TestReport {
  enum Kind {
    kReceived,  // TCP: what arrived from `peer`
    kSent,      // TCP: sent to `peer` as ordered (or `error`)
    kQp,        // RDMA: the queue pair made for `peer` (or `error`)
    kReady,     // RDMA: the queue pair for `peer` connected (or `error`)
    kWritten,   // RDMA: what the writes to `peer` moved (or `error`)
    kNcclId,    // NCCL: rank 0's unique id for the pair with `peer` (or `error`)
    kNcclDone,  // NCCL: what this node's all_reduce with `peer` moved (or `error`)
  } kind = kReceived;
  std::uint32_t peer = 0;           // the other node's id
  std::uint64_t bytes = 0;          // kReceived, kWritten
  std::uint64_t usec = 0;           // kReceived: from the header to EOF; kWritten: first post to last completion
  std::string error;                // kSent, kQp, kReady, kWritten: "" when it worked
  QpInfo qp;                        // kQp without error
  std::string nccl_id;              // kNcclId without error: 256 hex digits
};
inline constexpr std::size_t kNcclIdHex = 256;
std::string format_test_report(const TestReport& r);
std::optional<TestReport> parse_test_report(const std::string& line);

// srun's orders: send to a node over TCP for `ms` milliseconds (0: connect, say who,
// close); make an RDMA queue pair for a node, connect it to the node's, write to it for
// `ms`; or the end of the test with the step's fate.
struct Order {
  enum Kind { kSend, kEnd, kQp, kConnect, kWrite, kNccl } kind = kEnd;
  std::uint32_t peer = 0;
  std::string addr;
  int port = 0;
  std::uint32_t ms = 0;   // kSend, kWrite
  bool ok = false;        // kEnd
  QpInfo qp;              // kConnect: the peer's queue pair
  int rank = 0;           // kNccl: this node's rank in the pair (0 makes the id)
  std::string nccl_id;    // kNccl, rank 1: the id rank 0 made
};
std::string format_order(const Order& o);
std::optional<Order> parse_order(const std::string& line);

// The first line on a test connection: "gpudiag-fabric TOKEN data FROM".
std::string format_data_header(const std::string& token, std::uint32_t from);
std::optional<std::uint32_t> parse_data_header(const std::string& line, const std::string& token);

}  // namespace gpudiag::fabric
