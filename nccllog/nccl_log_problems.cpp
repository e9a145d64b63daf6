#include "nccllog/nccl_log_problems.h"

#include <fmt/format.h>

#include "util/text_lists.h"

#include <algorithm>
#include <map>

#include "util/name_patterns.h"

namespace gpudiag {
namespace {

bool bad_iface(const std::string& name) {
  return name == "lo" || matches_any({"docker*", "virbr*", "flannel*", "cni*", "veth*"}, name);
}

bool is_ipoib(const std::string& name) { return matches_any({"ib*"}, name); }

// Net plugins that drive the IB verbs themselves (Mellanox's IBext/SHARP, UCX): using
// one on an IB host is the point of it. Names as the plugins report them.
bool plugin_uses_ib(const std::string& network) {
  for (const char* n : {"IB", "UCX", "SHARP"})
    if (network.find(n) != std::string::npos) return true;
  return false;
}

bool uses_gdr(const NcclProcess& p) {
  for (const auto& [t, n] : p.transports)
    if (t.find("GDRDMA") != std::string::npos) return true;
  return false;
}

std::string hca_names(const std::vector<std::string>& devs) {
  std::vector<std::string> names;
  for (const auto& d : devs) names.push_back(d.substr(0, d.find(':')));
  return join(names);
}

struct Collector {
  std::vector<NcclProblem> out;
  std::map<std::string, std::size_t> by_kind;
  void add(Severity s, const std::string& kind, const std::string& message, const std::string& fix,
           const std::string& who) {
    auto it = by_kind.find(kind);
    if (it == by_kind.end()) {
      by_kind[kind] = out.size();
      out.push_back({s, kind, message, fix, {}});
      it = by_kind.find(kind);
    }
    auto& w = out[it->second].who;
    if (!who.empty() && std::find(w.begin(), w.end(), who) == w.end()) w.push_back(who);
  }
};

std::string net_name(const std::string& network) {
  return network == "IB" || network == "Socket" ? "NET/" + network : network;
}

std::string ib_error_kind(int code) { return "ib-error-" + std::to_string(code); }

void ib_error(Collector& c, int code, const std::string& who) {
  switch (code) {
    case 12:
      c.add(Severity::problem, ib_error_kind(code), "IB completion error 12 (transport retry counter exceeded)",
            "the NICs cannot reach each other: check the fabric between these hosts (`ibstat`, `ibdiagnet`, link "
            "errors in `perfquery`, the subnet manager); on RoCE check NCCL_IB_GID_INDEX, VLAN and PFC",
            who);
      break;
    case 4:
      c.add(Severity::problem, ib_error_kind(code), "IB completion error 4 (local protection error)",
            "usually PCIe ACS or the IOMMU breaking GPUDirect RDMA: run `gpudiag-health --checks acs,iommu` on this "
            "host; disable ACS redirect or boot with iommu=pt (NCCL_NET_GDR_LEVEL=LOC confirms it by avoiding GDR)",
            who);
      break;
    case 5:
      c.add(Severity::warning, ib_error_kind(code), "IB completion error 5 (work request flushed)",
            "a queue pair went into the error state after an earlier failure: look for the first error, often on "
            "the peer",
            who);
      break;
    default:
      c.add(Severity::problem, ib_error_kind(code), fmt::format("IB completion error {}", code),
            "see ibv_wc_status in <infiniband/verbs.h> for the code; check the fabric and both hosts' NICs", who);
  }
}

void init_completion(Collector& c, const NcclLogAnalysis& a) {
  // The job's largest communicator: which of its ranks finished init? Logs below INFO
  // level hold no init lines at all, and then nothing can be said.
  int nranks = 0;
  std::string group;
  for (const auto& p : a.processes)
    if (const CommInfo* w = p.world(); w && w->nranks > nranks) {
      nranks = w->nranks;
      group = w->comm_id;
    }
  if (nranks == 0) return;
  std::set<int> complete, seen;
  std::vector<std::string> stuck;
  for (const auto& p : a.processes) {
    for (const auto& [ptr, ci] : p.comms) {
      if (ci.nranks != nranks || (!group.empty() && !ci.comm_id.empty() && ci.comm_id != group)) continue;
      seen.insert(ci.rank);
      if (ci.complete) complete.insert(ci.rank);
      else stuck.push_back(p.host + ":" + std::to_string(ci.rank));
    }
  }
  std::vector<std::string> absent;
  for (int r = 0; r < nranks && absent.size() < 32; ++r)
    if (!seen.count(r)) absent.push_back(std::to_string(r));
  if (stuck.empty() && absent.empty()) return;
  std::string message = fmt::format("{} of {} ranks never reached Init COMPLETE",
                                    nranks - static_cast<int>(complete.size()), nranks);
  if (!absent.empty()) message += fmt::format(" (no log at all from rank {})", join(absent));
  c.add(Severity::problem, "init-incomplete", message,
        "those ranks hung or died while NCCL set up: read their WARN lines; a rank with no log may not have started, "
        "or logged on a node whose diag dir is not visible here",
        "");
  for (const auto& s : stuck) c.add(Severity::problem, "init-incomplete", message, "", s);
}

// A setting that matched nothing on a node: NCCL never started there (no socket
// interface), or it fell back from IB (no HCA). Named with its value and the node.
void settings_matching_nothing(Collector& c, const NcclProcess& p) {
  const std::string who = p.label();
  if (p.no_socket_iface) {
    if (!p.socket_ifname.empty())
      c.add(Severity::problem, "socket-ifname-matches-nothing",
            fmt::format("NCCL_SOCKET_IFNAME={} matched no interface on {}, so NCCL never started there", p.socket_ifname,
                        p.host),
            "NCCL_SOCKET_IFNAME takes interface name prefixes (`=` for an exact name, `^` to exclude): list the "
            "node's interfaces (`ip -br link` on that node) and set it to one that every node has, e.g. "
            "NCCL_SOCKET_IFNAME=eth0, or unset it and let NCCL choose; site-wide with gpudiag's plugin.nccl_env",
            who);
    else
      c.add(Severity::problem, "no-socket-interface",
            fmt::format("NCCL found no usable socket interface on {}, so NCCL never started there", p.host),
            "NCCL needs one non-loopback interface with an address for its bootstrap: check `ip -br addr` on that "
            "node (a container without its network?) and the NCCL_SOCKET_IFNAME the job sets",
            who);
  }
  if (!p.ib_hca.empty() && p.ib_no_device && p.ib_devices.empty())
    c.add(Severity::problem, "ib-hca-matches-nothing",
          fmt::format("NCCL_IB_HCA={} matched no IB device on {}: NCCL fell back to {}", p.ib_hca, p.host,
                      p.network.empty() ? std::string("no network") : net_name(p.network)),
          "NCCL_IB_HCA takes HCA name prefixes, optionally with :port (`=` exact, `^` exclude): list the node's HCAs "
          "(`ibv_devinfo -l` or /sys/class/infiniband) and set it to names every node has, or use gpudiag's "
          "NCCL_IB_HCA: auto, which the plugin resolves per node from sysfs",
          who);
}

// In a hang, the rank that stopped is the one whose last collective lies behind the others'
// on the same communicator (COLL lines, NCCL_DEBUG_SUBSYS=COLL).
void stopped_collectives(Collector& c, const NcclLogAnalysis& a) {
  if (a.truncated) return;  // the logs' ends were not read
  struct Last {
    std::string who, coll;
    std::uint64_t op;
  };
  std::map<std::string, std::vector<Last>> groups;  // comm id (or size) -> each rank's last call
  for (const auto& p : a.processes)
    for (const auto& [ptr, ci] : p.comms)
      if (!ci.last_coll.empty())
        groups[ci.comm_id.empty() ? "nranks=" + std::to_string(ci.nranks) : ci.comm_id].push_back(
            {p.label(), ci.last_coll, ci.last_op});
  std::vector<const std::vector<Last>*> largest_first;
  for (const auto& [group, lasts] : groups) largest_first.push_back(&lasts);
  std::stable_sort(largest_first.begin(), largest_first.end(),
                   [](const auto* x, const auto* y) { return x->size() > y->size(); });
  for (const auto* group : largest_first) {
    const auto& lasts = *group;
    if (lasts.size() < 2) continue;
    std::uint64_t top = 0;
    for (const auto& l : lasts) top = std::max(top, l.op);
    std::vector<const Last*> behind;
    for (const auto& l : lasts)
      if (l.op < top) behind.push_back(&l);
    // Ranks that stopped are the few; most ranks behind means the others ran ahead.
    if (behind.empty() || behind.size() * 2 > lasts.size()) continue;
    const Last& first = *behind.front();
    const std::string kind = "collectives-stopped";
    c.add(Severity::problem, kind,
          fmt::format("{}'s collectives stopped at opCount {:x} ({}) while {} other rank(s) went on to opCount {:x}",
                      behind.size() == 1 ? "rank " + first.who : std::to_string(behind.size()) + " ranks'", first.op,
                      first.coll, lasts.size() - behind.size(), top),
          "the rank(s) never called the next collective: they are stuck outside NCCL (their own code, data loading, a "
          "dead GPU or a crash): the hang verdict and `gpudiag stacks JOB` show where",
          "");
    for (const auto* l : behind) c.add(Severity::problem, kind, "", "", l->who);
    return;  // the largest communicator's first: one such finding says enough
  }
}

}  // namespace

std::vector<NcclProblem> diagnose(const NcclLogAnalysis& a, const std::set<std::string>& hosts_with_active_ib) {
  Collector c;
  std::set<std::string> hosts;
  for (const auto& p : a.processes) hosts.insert(p.host);
  std::map<std::string, std::vector<std::string>> versions, networks;
  // What the logs say about each host's IB, whatever the host running this has.
  std::set<std::string> hosts_logging_ib;
  std::vector<std::string> on_ib, on_socket;
  for (const auto& p : a.processes) {
    if (!p.ib_devices.empty()) hosts_logging_ib.insert(p.host);
    if (p.network == "IB") on_ib.push_back(p.label());
    if (p.network == "Socket") on_socket.push_back(p.label());
  }
  const bool multi_host = hosts.size() > 1;

  if (!on_ib.empty() && !on_socket.empty()) {
    c.add(Severity::problem, "socket-beside-ib",
          fmt::format("{} of {} ranks used NET/Socket while the others used NET/IB", on_socket.size(),
                      on_socket.size() + on_ib.size()),
          "the TCP ranks set the pace of the whole job: on their hosts NCCL found no usable IB device (look for "
          "`NET/IB : No device found.`): check the HCAs there (`gpudiag-health --checks ib`, `ibstat`), that the job "
          "sees /dev/infiniband and has libibverbs/rdma-core, and that NCCL_IB_HCA and NCCL_IB_DISABLE are the same on "
          "every node",
          "");
    for (const auto& w : on_socket) c.add(Severity::problem, "socket-beside-ib", "", "", w);
  }

  for (const auto& p : a.processes) {
    const std::string who = p.label();
    if (!p.version.empty()) versions[p.version].push_back(who);
    std::string net = p.network;
    if (!p.plugin.empty() && p.plugin != "internal") net += " (plugin " + p.plugin + ")";
    if (!net.empty()) networks[net].push_back(who);

    // The host's sysfs (given only when the analyzer runs on that host) counts only
    // where the log itself says nothing about IB for this process.
    const bool log_knows_ib = !p.ib_devices.empty() || p.ib_no_device || p.ib_disabled_by_env;
    if (p.network == "Socket" &&
        (!p.ib_devices.empty() || (!log_knows_ib && hosts_with_active_ib.count(p.host))))
      c.add(Severity::problem, "socket-with-ib", "NCCL used NET/Socket on hosts that have active IB ports",
            "inter-node traffic crawls over TCP: something stopped NCCL from using IB (NCCL_IB_DISABLE=1, an "
            "NCCL_IB_HCA that matches no device, or no libibverbs/rdma-core in the container): check the job's "
            "NCCL_* variables and `ibv_devinfo` inside the job",
            who);
    if (p.ib_disabled_by_env && p.network != "IB") {
      std::string ipoib;
      for (const auto& d : p.socket_devices)
        if (ipoib.empty() && is_ipoib(d)) ipoib = d;
      if (ipoib.empty() && is_ipoib(p.oob)) ipoib = p.oob;
      if (!ipoib.empty())
        c.add(Severity::problem, "ib-disabled-on-ipoib",
              fmt::format("NCCL_IB_DISABLE=1 on hosts whose network is IPoIB ({}): NCCL runs TCP over the IB fabric",
                          ipoib),
              "TCP over IPoIB is several times slower than RDMA over the same links: remove NCCL_IB_DISABLE from the "
              "job and site environment (`env | grep NCCL_IB`, gpudiag's plugin.nccl_env) so that NCCL uses NET/IB",
              who);
    }
    if (!p.gdr_disabled.empty() && p.network == "IB" && multi_host && !uses_gdr(p))
      c.add(Severity::warning, "gdr-disabled",
            "GPUDirect RDMA is off (nvidia-peermem not loaded): IB traffic is staged through host memory",
            "load the module on these hosts (`modprobe nvidia-peermem`, and at boot via /etc/modules-load.d); NCCL "
            "2.19+ can use DMA-BUF instead (Linux 5.12+, the open GPU kernel module 515+, NCCL_DMABUF_ENABLE=1); NCCL "
            "logged it for " + hca_names(p.gdr_disabled),
            who);
    if (!p.network.empty() && p.network != "IB" && p.network != "Socket" && !plugin_uses_ib(p.network) &&
        hosts_logging_ib.count(p.host))
      c.add(Severity::problem, "plugin-beside-ib",
            fmt::format("NCCL used the net plugin {} on hosts whose logs show IB devices", p.network),
            "that plugin does not use RDMA, so traffic that could go over IB goes over TCP or another NIC: remove it "
            "from the job (unset NCCL_NET_PLUGIN, or drop the libnccl-net.so that provides it from LD_LIBRARY_PATH) "
            "or use an IB plugin, the same on every node",
            who);
    for (const auto& d : p.socket_devices)
      if (bad_iface(d))
        c.add(Severity::problem, "socket-bad-iface", fmt::format("NET/Socket uses {}", d),
              "lo, docker*, virbr* and flannel* do not reach other nodes: set NCCL_SOCKET_IFNAME to the cluster "
              "network (e.g. =eth0), site-wide with gpudiag's plugin.nccl_env",
              who);
    if (!p.oob.empty() && bad_iface(p.oob) && (p.oob != "lo" || hosts.size() > 1))
      c.add(Severity::problem, "oob-bad-iface", fmt::format("NCCL's bootstrap (OOB) uses {}", p.oob),
            "ranks on other nodes cannot connect back over it and init hangs: set NCCL_SOCKET_IFNAME to the cluster "
            "network",
            who);
    for (const auto& d : p.ib_devices)
      if (d.rfind("mlx5_bond", 0) == 0)
        c.add(Severity::warning, "bond-hca", fmt::format("NCCL uses the bond device {}", d.substr(0, d.find(':'))),
              "a bond is usually the management or storage network: exclude it with NCCL_IB_HCA=^=mlx5_bond_0, or "
              "list the training HCAs (gpudiag's NCCL_IB_HCA: auto leaves bonds out)",
              who);
    for (const auto& [code, n] : p.ib_errors) ib_error(c, code, who);
    if (p.shm_failed)
      c.add(Severity::problem, "shm", "NCCL could not create or extend its /dev/shm segment",
            "/dev/shm is too small (Docker's default is 64 MiB): give the container --shm-size=1g or a larger tmpfs; "
            "NCCL_SHM_DISABLE=1 works around it at a cost",
            who);
    if (p.reg_mr_failed)
      c.add(Severity::problem, "reg-mr", "ibv_reg_mr failed: NCCL could not register memory with the NIC",
            "the memlock limit is too low (want unlimited: `ulimit -l`; in Slurm set LimitMEMLOCK=infinity for "
            "slurmd and PropagateResourceLimitsExcept=MEMLOCK), or GPUDirect RDMA lacks nvidia-peermem",
            who);
    if (p.p2p_disabled)
      c.add(Severity::warning, "p2p-disabled", "P2P between GPUs is disabled or not supported",
            "intra-node traffic goes through host memory: NCCL_P2P_DISABLE is set, or ACS/IOMMU/a VM blocks P2P: run "
            "`gpudiag-health --checks p2p,acs`",
            who);
    if (p.duplicate_gpu)
      c.add(Severity::problem, "duplicate-gpu", "two ranks use the same GPU",
            "each rank must pick its own GPU: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])), or srun "
            "--gpus-per-task=1",
            who);
  }
  if (versions.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [v, w] : versions) parts.push_back(fmt::format("{} on {} rank(s)", v, w.size()));
    c.add(Severity::problem, "version-mismatch", "NCCL versions differ across ranks: " + join(parts),
          "ranks with different NCCL versions may not interoperate: run every node from one image or environment", "");
    for (const auto& [v, w] : versions)
      if (w.size() * 2 <= a.processes.size())
        for (const auto& x : w) c.add(Severity::problem, "version-mismatch", "", "", x);
  }
  // IB beside Socket alone is socket-beside-ib, with a more precise fix.
  const bool only_ib_and_socket =
      networks.size() == 2 && networks.count("IB") && networks.count("Socket");
  if (networks.size() > 1 && !only_ib_and_socket) {
    std::vector<std::string> parts;
    for (const auto& [n, w] : networks) parts.push_back(fmt::format("{} on {} rank(s)", n, w.size()));
    c.add(Severity::problem, "network-mismatch", "ranks use different networks: " + join(parts),
          "a net plugin (or IB) loaded on some nodes only: the ranks cannot talk to each other over one transport; "
          "make the plugin (NCCL_NET_PLUGIN, libnccl-net.so) and NCCL_IB_* the same everywhere",
          "");
    for (const auto& [n, w] : networks)
      if (w.size() * 2 <= a.processes.size())
        for (const auto& x : w) c.add(Severity::problem, "network-mismatch", "", "", x);
  }
  for (const auto& p : a.processes) settings_matching_nothing(c, p);
  stopped_collectives(c, a);
  init_completion(c, a);
  for (const auto& m : a.mismatches) {
    std::vector<std::string> calls;
    for (const auto& [who, coll] : m.calls) calls.push_back(coll + " on " + who);
    c.add(Severity::problem, "collective-mismatch",
          fmt::format("ranks issued different collectives at opCount {}: {}", m.op_count, join(calls)),
          "the ranks' code paths diverged, which hangs or corrupts the job: TORCH_DISTRIBUTED_DEBUG=DETAIL reports "
          "where",
          "");
    break;  // the first divergence is the one that matters
  }
  return c.out;
}

bool nothing_read(const NcclLogAnalysis& a) { return a.nccl_lines == 0; }

int nccl_log_exit_code(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems) {
  if (nothing_read(a)) return kNcclLogUnknown;
  int code = a.warnings.empty() ? 0 : 1;
  for (const auto& p : problems) code = std::max(code, static_cast<int>(p.severity));
  return code;
}

}  // namespace gpudiag
