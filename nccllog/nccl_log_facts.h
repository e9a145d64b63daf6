#pragma once
// What one NCCL INFO/WARN message says, for the messages the analyzer cares about.
// Wording differs across NCCL 2.10 - 2.29; each function accepts every form we know
// (ARCHITECTURE §6) and returns nothing for anything else. Pure, no allocation beyond the
// results.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

// "NCCL version 2.21.5+cuda12.4" -> "2.21.5"
std::optional<std::string_view> nccl_version_of(std::string_view msg);
// At NCCL_DEBUG=VERSION or WARN, NCCL prints the version line bare, with no
// host:pid:tid prefix; a tag or timestamp of ours may still stand in front of it.
std::optional<std::string_view> bare_nccl_version_of(std::string_view line);
// "Using network IB" -> "IB" (also Socket, or a plugin's name)
std::optional<std::string_view> network_of(std::string_view msg);

struct NetDevice {
  std::string name;        // mlx5_0, eth0
  std::string port;        // "1" for IB, "" for sockets
  std::string link_layer;  // IB, RoCE, or "" for sockets
};
struct NetUsing {
  bool ib = false;  // NET/IB, else NET/Socket
  std::vector<NetDevice> devices;
  std::string oob;  // NET/IB's "OOB eth0:..." interface name
};
// "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
// "NET/Socket : Using [0]eth0:10.0.0.23<0> [1]eth1:10.0.1.23<0>"
std::optional<NetUsing> net_using_of(std::string_view msg);
// "NET/IB : No device found." (also "NET/IB: No device found"): IB was tried and
// nothing usable was there.
bool is_ib_no_device(std::string_view msg);
// "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)" -> "mlx5_0":
// nvidia-peermem is not loaded, so IB traffic is staged through host memory.
std::optional<std::string_view> gdr_disabled_hca_of(std::string_view msg);
// "NCCL_IB_DISABLE set by environment to 1." (the period came in later versions)
bool is_ib_disabled_by_env(std::string_view msg);
// "NCCL_SOCKET_IFNAME set by environment to =eth9" (ENV) or "NCCL_SOCKET_IFNAME set to
// =eth9" (NET) -> "=eth9"; the same for NCCL_IB_HCA ("NCCL_IB_HCA set to mlx5_9", net_ib.cc).
std::optional<std::string_view> socket_ifname_of(std::string_view msg);
std::optional<std::string_view> ib_hca_of(std::string_view msg);
// "Bootstrap : no socket interface found" (bootstrap.cc, nothing matched NCCL_SOCKET_IFNAME
// or no interface at all), "NET/Socket : No usable listening interface found" (the same
// with NCCL_COMM_ID): NCCL never started.
bool is_no_socket_interface(std::string_view msg);
// "Bootstrap : Using eth0:10.0.0.1<0>" -> "eth0"
std::optional<std::string_view> bootstrap_iface_of(std::string_view msg);
// "NET/Plugin: Loaded net plugin Libfabric (v6)" -> "Libfabric"; the internal
// implementation -> "internal"
std::optional<std::string> net_plugin_of(std::string_view msg);
// "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA": device
// indices dropped so that channels group by kind.
std::optional<std::string> channel_transport_of(std::string_view msg);

struct CommInit {
  std::string comm, comm_id;  // "0x55d0..." pointers; comm_id only from NCCL 2.13 on
  int rank = -1, nranks = 0;
  bool start = false, complete = false;
};
// "... comm 0x55 rank 3 nranks 16 cudaDev 3 ... commId 0x9f - Init START|COMPLETE"
std::optional<CommInit> comm_init_of(std::string_view msg);

struct CollCall {
  std::string_view name;  // AllReduce, Broadcast, ...
  std::string_view op_count, comm;
};
// "AllReduce: opCount 28c sendbuff 0x... count 1024 datatype 7 op 0 root 0 comm 0x..."
std::optional<CollCall> collective_of(std::string_view msg);

// "Got completion from peer 10.0.0.2<41234> with error 12, ..." (<= 2.19) or
// "... with status=12 opcode=0 ..." (later) -> 12
std::optional<int> ib_completion_error_of(std::string_view msg);

bool is_shm_failure(std::string_view msg);       // could not create or extend /dev/shm
bool is_reg_mr_failure(std::string_view msg);    // ibv_reg_mr failed
bool is_p2p_disabled(std::string_view msg);      // P2P off, or peer access unsupported
bool is_duplicate_gpu(std::string_view msg);     // "Duplicate GPU detected : rank 1 and rank 0 ..."

}  // namespace gpudiag
