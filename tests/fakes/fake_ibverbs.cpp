// A fake libibverbs.so.1 for the fabric test's RDMA path (issue 32) on machines without
// RDMA: one RoCE "HCA" (mlx5_0, or the names in FAKE_IBVERBS_DEVICES) whose port is
// active and whose GID 0 is the node's first IPv4 address. An RC queue pair really moves
// the bytes of each RDMA write between the nodes: it listens on a TCP port (its QP number
// is that port) from ibv_create_qp, connects at RTR to the peer's GID address and QP
// number, and the peer's thread writes each message into the registered memory its rkey
// names (bounds and access checked) and acknowledges it; ibv_poll_cq turns the acks into
// completions. So a `tc`-shaped link is slow over the fake RDMA too. The ops that verbs.h
// calls inline (post_send, poll_cq) are filled in the context, as a provider does.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_net.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

struct WriteHeader {
  std::uint64_t addr;
  std::uint32_t rkey;
  std::uint32_t length;
};
constexpr std::uint32_t kMaxWrite = 64u << 20;

std::mutex g_mu;
std::map<std::uint32_t, ibv_mr*> g_mrs;  // rkey -> region
std::map<std::uint32_t, int> g_access;   // rkey -> access flags
std::uint32_t g_next_key = 0x100;

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

bool wait_fd(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int rc;
  do rc = ::poll(&p, 1, ms);
  while (rc < 0 && errno == EINTR);
  return rc == 1;
}

bool send_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, 10000)) return false;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t n, const std::atomic<bool>& stop) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (stop) return false;
    if (!wait_fd(fd, POLLIN, 100)) continue;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

struct FakeContext {
  ibv_context ctx;  // first: the library hands out &ctx
};

struct FakeQp;
struct FakeCq {
  ibv_cq cq;
  std::vector<FakeQp*> qps;
};

struct FakeQp {
  ibv_qp qp;
  int listen_fd = -1;
  int out_fd = -1;  // to the peer: our writes, its acks
  std::deque<std::uint64_t> outstanding;
  std::atomic<bool> stop{false};
  std::thread receiver;
  int access = 0;
};

// The peer's side of our queue pair: writes into our memory, one ack byte each.
void serve_writes(FakeQp* q) {
  int fd = -1;
  while (!q->stop && fd < 0) {
    if (!wait_fd(q->listen_fd, POLLIN, 100)) continue;
    fd = ::accept4(q->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
  while (!q->stop && fd >= 0) {
    WriteHeader h{};
    if (!recv_all(fd, &h, sizeof h, q->stop)) break;
    char* dest = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto mr = g_mrs.find(h.rkey);
      if (mr != g_mrs.end() && (g_access[h.rkey] & IBV_ACCESS_REMOTE_WRITE) && h.length <= kMaxWrite) {
        auto base = reinterpret_cast<std::uintptr_t>(mr->second->addr);
        if (h.addr >= base && h.addr - base <= mr->second->length && h.length <= mr->second->length - (h.addr - base))
          dest = reinterpret_cast<char*>(h.addr);
      }
    }
    if (!dest) {
      // A remote access error: the payload goes nowhere, the sender's completion says so.
      static thread_local std::vector<char> scratch(1 << 16);
      std::uint32_t left = h.length;
      while (left > 0) {
        const std::uint32_t n = std::min<std::uint32_t>(left, static_cast<std::uint32_t>(scratch.size()));
        if (!recv_all(fd, scratch.data(), n, q->stop)) break;
        left -= n;
      }
      const char nak = 1;
      if (left > 0 || !send_all(fd, &nak, 1)) break;
      continue;
    }
    if (!recv_all(fd, dest, h.length, q->stop)) break;
    const char ack = 0;
    if (!send_all(fd, &ack, 1)) break;
  }
  if (fd >= 0) ::close(fd);
}

int fake_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr; wr = wr->next) {
    if (q->out_fd < 0 || qp->state != IBV_QPS_RTS || wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge != 1) {
      *bad = wr;
      return EINVAL;
    }
    const ibv_sge& s = wr->sg_list[0];
    WriteHeader h{wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, s.length};
    if (!send_all(q->out_fd, &h, sizeof h) ||
        !send_all(q->out_fd, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(s.addr)), s.length)) {
      *bad = wr;
      return EIO;
    }
    q->outstanding.push_back(wr->wr_id);
  }
  return 0;
}

int fake_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  auto* c = reinterpret_cast<FakeCq*>(cq);
  int got = 0;
  for (FakeQp* q : c->qps) {
    if (q->outstanding.empty() || q->out_fd < 0) continue;
    // Block a moment when nothing is there: a spinning caller would starve the peer's
    // thread on a small test machine.
    if (!wait_fd(q->out_fd, POLLIN, 1)) continue;
    while (got < n && !q->outstanding.empty()) {
      char ack;
      ssize_t k = ::recv(q->out_fd, &ack, 1, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) break;
      ibv_wc& w = wc[got++];
      std::memset(&w, 0, sizeof w);
      w.wr_id = q->outstanding.front();
      q->outstanding.pop_front();
      w.opcode = IBV_WC_RDMA_WRITE;
      w.qp_num = q->qp.qp_num;
      w.status = k == 1 && ack == 0 ? IBV_WC_SUCCESS : (k == 1 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_RETRY_EXC_ERR);
      if (k != 1) {  // the connection is gone: every write still out fails
        ::close(q->out_fd);
        q->out_fd = -1;
        while (got < n && !q->outstanding.empty()) {
          ibv_wc& e = wc[got++];
          std::memset(&e, 0, sizeof e);
          e.wr_id = q->outstanding.front();
          q->outstanding.pop_front();
          e.status = IBV_WC_WR_FLUSH_ERR;
          e.qp_num = q->qp.qp_num;
        }
        break;
      }
    }
  }
  return got;
}

std::vector<ibv_device*>& devices() {
  static std::vector<ibv_device*> list = [] {
    std::vector<ibv_device*> out;
    std::string names = env("FAKE_IBVERBS_DEVICES", "mlx5_0");
    std::size_t start = 0;
    while (start <= names.size()) {
      auto comma = names.find(',', start);
      std::string n = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      // In static storage, not on the heap: a test that loads this library and lets it go
      // would otherwise show LeakSanitizer one device per load.
      static ibv_device pool[16];
      if (!n.empty() && out.size() < sizeof pool / sizeof pool[0]) {
        auto* d = &pool[out.size()];
        *d = ibv_device{};
        d->node_type = IBV_NODE_CA;
        d->transport_type = IBV_TRANSPORT_IB;
        std::snprintf(d->name, sizeof d->name, "%s", n.c_str());
        std::snprintf(d->dev_name, sizeof d->dev_name, "uverbs%zu", out.size());
        out.push_back(d);
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }();
  return list;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  auto& d = devices();
  auto** list = static_cast<ibv_device**>(std::calloc(d.size() + 1, sizeof(ibv_device*)));
  for (std::size_t i = 0; i < d.size(); ++i) list[i] = d[i];
  if (num) *num = static_cast<int>(d.size());
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* d) { return d ? d->name : nullptr; }

ibv_context* ibv_open_device(ibv_device* d) {
  auto* c = new FakeContext{};
  c->ctx.device = d;
  c->ctx.ops.post_send = fake_post_send;
  c->ctx.ops.poll_cq = fake_poll_cq;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = -1;
  c->ctx.num_comp_vectors = 1;
  return &c->ctx;
}

int ibv_close_device(ibv_context* c) {
  delete reinterpret_cast<FakeContext*>(c);
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  a->phys_port_cnt = 1;
  a->max_qp = 1024;
  a->max_qp_wr = 1024;
  a->max_cqe = 4096;
  return 0;
}

int ibv_query_port(ibv_context*, std::uint8_t port, _compat_ibv_port_attr* out) {
  if (port != 1) return EINVAL;
  ibv_port_attr a{};
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = IBV_MTU_4096;
  a.gid_tbl_len = 16;
  a.lid = 0;
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  // Callers pass a whole ibv_port_attr (verbs.h casts it), as gpudiag does.
  std::memcpy(static_cast<void*>(out), &a, sizeof a);
  return 0;
}

int ibv_query_gid(ibv_context*, std::uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index >= 16) return EINVAL;
  std::memset(gid, 0, sizeof *gid);
  if (index == 0) {
    gid->raw[10] = gid->raw[11] = 0xff;
    const in_addr a = fake::node_ipv4();
    std::memcpy(gid->raw + 12, &a, 4);
  }
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* c) {
  auto* pd = new ibv_pd{};
  pd->context = c;
  return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  auto* mr = new ibv_mr{};
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  std::lock_guard<std::mutex> lock(g_mu);
  mr->lkey = mr->rkey = g_next_key++;
  g_mrs[mr->rkey] = mr;
  g_access[mr->rkey] = access;
  return mr;
}

int ibv_dereg_mr(ibv_mr* mr) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_mrs.erase(mr->rkey);
    g_access.erase(mr->rkey);
  }
  delete mr;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  auto* cq = new FakeCq{};
  cq->cq.context = c;
  cq->cq.cq_context = cq_context;
  cq->cq.channel = channel;
  cq->cq.cqe = cqe;
  return &cq->cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
  delete reinterpret_cast<FakeCq*>(cq);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (init->qp_type != IBV_QPT_RC) {
    errno = EINVAL;
    return nullptr;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = fake::node_ipv4();
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    errno = ENOMEM;
    return nullptr;
  }
  auto* q = new FakeQp{};
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = init->send_cq;
  q->qp.recv_cq = init->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_num = ntohs(a.sin_port);  // the port the peer's writes come to
  q->listen_fd = fd;
  reinterpret_cast<FakeCq*>(init->send_cq)->qps.push_back(q);
  q->receiver = std::thread(serve_writes, q);
  return &q->qp;
}

int ibv_destroy_qp(ibv_qp* qp) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  q->stop = true;
  if (q->receiver.joinable()) q->receiver.join();
  if (q->out_fd >= 0) ::close(q->out_fd);
  ::close(q->listen_fd);
  auto& qps = reinterpret_cast<FakeCq*>(qp->send_cq)->qps;
  for (auto it = qps.begin(); it != qps.end(); ++it)
    if (*it == q) {
      qps.erase(it);
      break;
    }
  delete q;
  return 0;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  if (attr->qp_state == IBV_QPS_INIT) {
    q->access = attr->qp_access_flags;
  } else if (attr->qp_state == IBV_QPS_RTR) {
    if (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN) || !attr->ah_attr.is_global) return EINVAL;
    const std::uint8_t* g = attr->ah_attr.grh.dgid.raw;
    static const std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g, mapped, 12) != 0 || attr->dest_qp_num == 0 || attr->dest_qp_num > 65535) return EINVAL;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, g + 12, 4);
    a.sin_port = htons(static_cast<std::uint16_t>(attr->dest_qp_num));
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc != 0 && errno == EINPROGRESS) {
      int err = 0;
      socklen_t elen = sizeof err;
      rc = wait_fd(fd, POLLOUT, 3000) && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0 ? 0 : -1;
      if (rc != 0) errno = err ? err : ETIMEDOUT;
    }
    if (rc != 0) {
      int e = errno;
      ::close(fd);
      return e;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    q->out_fd = fd;
  } else if (attr->qp_state == IBV_QPS_RTS) {
    if (qp->state != IBV_QPS_RTR) return EINVAL;
  }
  qp->state = attr->qp_state;
  return 0;
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    default: return "unknown";
  }
}

}  // extern "C"
