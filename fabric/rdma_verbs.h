#pragma once
// The RDMA part of --diag=fabric (issue 32) on a node: verbs RC RDMA writes between the
// HCA ports NCCL_IB_HCA selects, as ib_write_bw does. libibverbs is loaded at run time
// (dlopen, as the probe loads the GPU libraries), so one plugin serves nodes with and
// without RDMA: a node without it says why and the test skips RDMA. ibv_post_send and
// ibv_poll_cq are inline in <infiniband/verbs.h> and call through the context's ops; the
// rest goes through dlsym. The queue pairs' details travel through srun (QpInfo).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/qp_info.h"

namespace gpudiag::fabric {

inline constexpr const char* kVerbsLibrary = "libibverbs.so.1";

// What libibverbs lists, as the port choice needs it.
struct HcaPort {
  int port = 1;
  bool active = false;
  bool ethernet = false;  // RoCE: needs a GID
};
struct Hca {
  std::string name;
  std::vector<HcaPort> ports;
};

// Pure: the first active port that an NCCL_IB_HCA value selects (NCCL's rules: "" all,
// "^" excludes, "=" exact names, else prefixes, ":PORT" a port), as "mlx5_0:1"; nullopt
// when none.
std::optional<std::pair<std::string, int>> pick_hca_port(const std::vector<Hca>& hcas, const std::string& nccl_ib_hca);

class RdmaNode {
 public:
  // Opens the port the test uses; nullptr with `why_none` set when the node has no RDMA
  // to test ("no libibverbs.so.1 (...)", "no active port that NCCL_IB_HCA=... selects").
  // `library`: the configured path, "" for libibverbs.so.1. `gid_index`: NCCL_IB_GID_INDEX's value.
  static std::unique_ptr<RdmaNode> open(const std::string& library, const std::string& nccl_ib_hca,
                                        const std::string& gid_index, std::string& why_none);
  ~RdmaNode();
  RdmaNode(const RdmaNode&) = delete;
  RdmaNode& operator=(const RdmaNode&) = delete;

  std::string hca_port() const;  // "mlx5_0:1"

  // A queue pair for writes with `peer` (one made before for it is destroyed): its
  // details for the peer, or nullopt with `error`.
  std::optional<QpInfo> make_qp(std::uint32_t peer, std::string& error);
  // Connects the queue pair for `peer` to the peer's (RTR, then RTS): "" or why not.
  std::string connect(std::uint32_t peer, const QpInfo& remote);
  // RDMA writes into the peer's buffer for `ms`, then waits (bounded) for the last
  // completions: the bytes completed and the time from the first post to the last one.
  struct Written {
    std::uint64_t bytes = 0, usec = 0;
    std::string error;
  };
  Written write_for(std::uint32_t peer, std::uint32_t ms);

  struct Impl;

 private:
  explicit RdmaNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpudiag::fabric
