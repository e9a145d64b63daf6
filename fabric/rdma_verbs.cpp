#include "fabric/rdma_verbs.h"

#include <infiniband/verbs.h>
#include <sys/random.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "fabric/node_differs.h"
#include "util/lib_loader.h"

namespace gpudiag::fabric {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMessage = 1u << 20;  // bytes per write, as ib_write_bw's large messages
constexpr int kDepth = 8;                     // writes in flight
constexpr int kGidScan = 16;                  // GID entries looked at for a RoCE address
constexpr double kDrain_s = 5;                // the last completions, at most

// The entry points that are real functions (the macros of verbs.h wrap these); the
// member names differ from the macros' so that they do not expand.
struct Verbs {
  Library lib;
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*query_port)(ibv_context*, std::uint8_t, ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, std::uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, std::size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status) = nullptr;

  // "" or what is missing.
  std::string load(const std::string& configured) {
    lib = load_library(configured, {kVerbsLibrary});
    if (!lib) return "no " + std::string(kVerbsLibrary) + " (" + describe_attempts(lib) + ")";
    std::string missing;
    resolve(lib, get_device_list, {"ibv_get_device_list"}, missing);
    resolve(lib, free_device_list, {"ibv_free_device_list"}, missing);
    resolve(lib, get_device_name, {"ibv_get_device_name"}, missing);
    resolve(lib, open_device, {"ibv_open_device"}, missing);
    resolve(lib, close_device, {"ibv_close_device"}, missing);
    resolve(lib, query_device, {"ibv_query_device"}, missing);
    resolve(lib, query_port, {"ibv_query_port"}, missing);
    resolve(lib, query_gid, {"ibv_query_gid"}, missing);
    resolve(lib, alloc_pd, {"ibv_alloc_pd"}, missing);
    resolve(lib, dealloc_pd, {"ibv_dealloc_pd"}, missing);
    resolve(lib, reg_mr, {"ibv_reg_mr"}, missing);
    resolve(lib, dereg_mr, {"ibv_dereg_mr"}, missing);
    resolve(lib, create_cq, {"ibv_create_cq"}, missing);
    resolve(lib, destroy_cq, {"ibv_destroy_cq"}, missing);
    resolve(lib, create_qp, {"ibv_create_qp"}, missing);
    resolve(lib, destroy_qp, {"ibv_destroy_qp"}, missing);
    resolve(lib, modify_qp, {"ibv_modify_qp"}, missing);
    resolve(lib, wc_status_str, {"ibv_wc_status_str"}, missing);
    return missing.empty() ? "" : lib.path + " lacks " + missing;
  }
};

std::string errno_text(const char* what, int err) { return std::string(what) + ": " + std::strerror(err ? err : EIO); }

bool ipv4_mapped(const ibv_gid& g) {
  static const std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, sizeof prefix) == 0;
}

}  // namespace

struct RdmaNode::Impl {
  Verbs v;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::string hca;
  int port = 1;
  ibv_port_attr port_attr{};
  int gid_index = -1;  // -1: no GRH
  ibv_gid gid{};

  struct Qp {
    void* buf = nullptr;
    ibv_mr* mr = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    std::uint32_t psn = 0;
    std::optional<QpInfo> remote;
  };
  std::map<std::uint32_t, Qp> qps;

  void destroy(Qp& q) {
    if (q.qp) v.destroy_qp(q.qp);
    if (q.cq) v.destroy_cq(q.cq);
    if (q.mr) v.dereg_mr(q.mr);
    std::free(q.buf);
    q = Qp{};
  }

  ~Impl() {
    for (auto& [peer, q] : qps) destroy(q);
    if (pd) v.dealloc_pd(pd);
    if (ctx) v.close_device(ctx);
    // libibverbs stays loaded: its providers are not made to be unloaded, and the
    // task's process execs the program next.
  }
};

std::optional<std::pair<std::string, int>> pick_hca_port(const std::vector<Hca>& hcas, const std::string& nccl_ib_hca) {
  for (const auto& h : hcas)
    for (const auto& p : h.ports)
      if (p.active && nccl_list_selects(nccl_ib_hca, h.name, p.port)) return std::make_pair(h.name, p.port);
  return std::nullopt;
}

RdmaNode::RdmaNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RdmaNode::~RdmaNode() = default;

std::string RdmaNode::hca_port() const { return impl_->hca + ":" + std::to_string(impl_->port); }

std::unique_ptr<RdmaNode> RdmaNode::open(const std::string& library, const std::string& nccl_ib_hca,
                                         const std::string& gid_index, std::string& why_none) {
  auto impl = std::make_unique<Impl>();
  why_none = impl->v.load(library);
  if (!why_none.empty()) return nullptr;
  Verbs& v = impl->v;
  int n = 0;
  ibv_device** list = v.get_device_list(&n);
  if (!list) {
    why_none = errno_text("ibv_get_device_list", errno);
    return nullptr;
  }
  // Every device's ports, then the choice; only the chosen device stays open.
  std::vector<Hca> hcas;
  for (int i = 0; i < n && i < 64; ++i) {
    Hca h;
    h.name = v.get_device_name(list[i]) ? v.get_device_name(list[i]) : "";
    if (ibv_context* c = v.open_device(list[i])) {
      ibv_device_attr da{};
      const int nports = v.query_device(c, &da) == 0 ? std::min<int>(da.phys_port_cnt, 8) : 1;
      for (int p = 1; p <= nports; ++p) {
        ibv_port_attr pa{};
        if (v.query_port(c, static_cast<std::uint8_t>(p), &pa) != 0) continue;
        h.ports.push_back(HcaPort{p, pa.state == IBV_PORT_ACTIVE, pa.link_layer == IBV_LINK_LAYER_ETHERNET});
      }
      v.close_device(c);
    }
    hcas.push_back(h);
  }
  auto pick = pick_hca_port(hcas, nccl_ib_hca);
  for (int i = 0; pick && i < n && !impl->ctx; ++i)
    if (v.get_device_name(list[i]) && pick->first == v.get_device_name(list[i])) impl->ctx = v.open_device(list[i]);
  v.free_device_list(list);
  if (!pick) {
    why_none = hcas.empty() ? "no RDMA device" : "no active port" + (nccl_ib_hca.empty() ? std::string() : " that NCCL_IB_HCA=" + nccl_ib_hca + " selects");
    return nullptr;
  }
  if (!impl->ctx) {
    why_none = errno_text(("ibv_open_device " + pick->first).c_str(), errno);
    return nullptr;
  }
  impl->hca = pick->first;
  impl->port = pick->second;
  if (v.query_port(impl->ctx, static_cast<std::uint8_t>(impl->port), &impl->port_attr) != 0) {
    why_none = errno_text("ibv_query_port", errno);
    return nullptr;
  }
  // The GID NCCL would use: NCCL_IB_GID_INDEX, else on RoCE the first IPv4-mapped one
  // (RoCE v2 over IPv4), on InfiniBand none (the LID routes).
  const bool roce = impl->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (!gid_index.empty() && gid_index.size() <= 3 && gid_index.find_first_not_of("0123456789") == std::string::npos) {
    impl->gid_index = std::atoi(gid_index.c_str());
  } else if (roce) {
    for (int g = 0; g < kGidScan && impl->gid_index < 0; ++g) {
      ibv_gid gid{};
      if (v.query_gid(impl->ctx, static_cast<std::uint8_t>(impl->port), g, &gid) == 0 && ipv4_mapped(gid))
        impl->gid_index = g;
    }
    if (impl->gid_index < 0) impl->gid_index = 0;
  }
  if (impl->gid_index >= 0 &&
      v.query_gid(impl->ctx, static_cast<std::uint8_t>(impl->port), impl->gid_index, &impl->gid) != 0) {
    why_none = errno_text("ibv_query_gid", errno);
    return nullptr;
  }
  impl->pd = v.alloc_pd(impl->ctx);
  if (!impl->pd) {
    why_none = errno_text("ibv_alloc_pd", errno);
    return nullptr;
  }
  return std::unique_ptr<RdmaNode>(new RdmaNode(std::move(impl)));
}

std::optional<QpInfo> RdmaNode::make_qp(std::uint32_t peer, std::string& error) {
  Impl& m = *impl_;
  Verbs& v = m.v;
  auto old = m.qps.find(peer);
  if (old != m.qps.end()) {
    m.destroy(old->second);
    m.qps.erase(old);
  }
  Impl::Qp q;
  auto fail = [&](const char* what) {
    error = errno_text(what, errno);
    if (errno == ENOMEM || errno == EPERM) error += " (ulimit -l: locked memory?)";
    m.destroy(q);
    return std::nullopt;
  };
  q.buf = std::aligned_alloc(4096, kMessage);
  if (!q.buf) return fail("memory");
  std::memset(q.buf, 0, kMessage);
  q.mr = v.reg_mr(m.pd, q.buf, kMessage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!q.mr) return fail("ibv_reg_mr");
  q.cq = v.create_cq(m.ctx, kDepth * 2, nullptr, nullptr, 0);
  if (!q.cq) return fail("ibv_create_cq");
  ibv_qp_init_attr init{};
  init.send_cq = q.cq;
  init.recv_cq = q.cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 1;
  init.cap.max_send_wr = kDepth;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  q.qp = v.create_qp(m.pd, &init);
  if (!q.qp) return fail("ibv_create_qp");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<std::uint8_t>(m.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int rc = v.modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    errno = rc;
    return fail("ibv_modify_qp INIT");
  }
  std::uint32_t r = 0;
  (void)::getrandom(&r, sizeof r, 0);
  q.psn = r & 0xffffff;
  QpInfo info;
  info.hca = m.hca;
  info.port = static_cast<std::uint8_t>(m.port);
  info.lid = m.port_attr.lid;
  info.qpn = q.qp->qp_num & 0xffffff;
  info.psn = q.psn;
  std::memcpy(info.gid.data(), m.gid.raw, 16);
  info.gid_index = m.gid_index;
  info.mtu = static_cast<std::uint8_t>(m.port_attr.active_mtu >= IBV_MTU_256 && m.port_attr.active_mtu <= IBV_MTU_4096
                                           ? m.port_attr.active_mtu
                                           : IBV_MTU_1024);
  info.rkey = q.mr->rkey;
  info.addr = reinterpret_cast<std::uintptr_t>(q.buf);
  info.length = kMessage;
  m.qps[peer] = q;
  return info;
}

std::string RdmaNode::connect(std::uint32_t peer, const QpInfo& remote) {
  Impl& m = *impl_;
  auto it = m.qps.find(peer);
  if (it == m.qps.end()) return "no queue pair made for this node";
  Impl::Qp& q = it->second;
  const bool grh = remote.gid_index >= 0 && m.gid_index >= 0;
  if ((remote.gid_index >= 0) != (m.gid_index >= 0))
    return "one side routes by GID and the other by LID (NCCL_IB_GID_INDEX or the link layer differs)";
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  const int local_mtu = m.port_attr.active_mtu >= IBV_MTU_256 && m.port_attr.active_mtu <= IBV_MTU_4096 ? m.port_attr.active_mtu : IBV_MTU_1024;
  a.path_mtu = static_cast<ibv_mtu>(std::min<int>(local_mtu, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.port_num = static_cast<std::uint8_t>(m.port);
  if (grh) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(m.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (int rc = m.v.modify_qp(q.qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return errno_text("ibv_modify_qp RTR", rc);
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;  // 4.096 us * 2^14: 67 ms a try
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = q.psn;
  s.max_rd_atomic = 1;
  if (int rc = m.v.modify_qp(q.qp, &s,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    return errno_text("ibv_modify_qp RTS", rc);
  q.remote = remote;
  return "";
}

RdmaNode::Written RdmaNode::write_for(std::uint32_t peer, std::uint32_t ms) {
  Written out;
  Impl& m = *impl_;
  auto it = m.qps.find(peer);
  if (it == m.qps.end() || !it->second.remote) {
    out.error = "no connected queue pair for this node";
    return out;
  }
  Impl::Qp& q = it->second;
  const QpInfo& r = *q.remote;
  const std::uint32_t size = std::min(kMessage, r.length);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(q.buf);
  sge.length = size;
  sge.lkey = q.mr->lkey;
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = r.addr;
  wr.wr.rdma.rkey = r.rkey;
  const auto start = Clock::now();
  const auto stop_posting = start + std::chrono::milliseconds(ms);
  const auto give_up = stop_posting + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kDrain_s));
  auto last = start;
  int in_flight = 0;
  ibv_wc wc[kDepth];
  while (true) {
    const auto now = Clock::now();
    while (in_flight < kDepth && now < stop_posting && out.error.empty()) {
      ibv_send_wr* bad = nullptr;
      wr.wr_id = static_cast<std::uint64_t>(in_flight);
      if (int rc = ibv_post_send(q.qp, &wr, &bad)) {
        out.error = errno_text("ibv_post_send", rc);
        break;
      }
      ++in_flight;
    }
    if (in_flight == 0) break;
    if (now >= give_up) {
      out.error = std::to_string(in_flight) + " writes not completed " + std::to_string(static_cast<int>(kDrain_s)) +
                  " s after the last was posted";
      break;
    }
    const int got = ibv_poll_cq(q.cq, kDepth, wc);
    if (got < 0) {
      out.error = "ibv_poll_cq failed";
      break;
    }
    for (int i = 0; i < got; ++i) {
      --in_flight;
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (out.error.empty())
          out.error = std::string("RDMA write failed: ") + (m.v.wc_status_str ? m.v.wc_status_str(wc[i].status) : "error") +
                      " (status " + std::to_string(wc[i].status) + ")";
        continue;
      }
      out.bytes += size;
      last = Clock::now();
    }
    if (!out.error.empty() && in_flight == 0) break;
  }
  out.usec = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(last - start).count());
  if (out.usec == 0 && out.error.empty()) out.error = "no write completed";
  return out;
}

}  // namespace gpudiag::fabric
