// A fake libnccl.so.2: ncclCommInitAll over the fake CUDA devices, grouped all_reduce
// (sum of floats, done at ncclGroupEnd on host memory), and NCCL's habit of logging to
// stdout when NCCL_DEBUG is set. Across processes and nodes (the fabric test's pairs):
// ncclGetUniqueId starts a root thread listening on the node's first IPv4 address (the
// id says where), ncclCommInitRank connects each rank to it, and an all_reduce on such a
// communicator sends the rank's floats to the root, which sums and sends them back: the
// bytes cross the network between the nodes, so a shaped link is slow here too.
#include <arpa/inet.h>
#include <algorithm>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <thread>
#include <vector>

#include "fake_net.h"

#include "fake_driver.h"

namespace {

struct Comm {
  int rank, nranks;
  int fd = -1;  // to the root, for a communicator across processes
};
struct UniqueId {
  char internal[128];
};
struct Op {
  const float* send;
  float* recv;
  std::size_t count;
  void* stream;
};
std::vector<Op> pending;
int group_depth = 0;
std::string last_error;

void log_info(const char* text) {
  if (!fake::env("NCCL_DEBUG").empty()) {
    // As real NCCL does: stdio, never flushed.
    std::printf("fakehost:%d:%d [0] NCCL INFO %s\n", static_cast<int>(::getpid()), static_cast<int>(::getpid()), text);
  }
}
int fail(const char* call) {
  fake::maybe_hang(call);
  int f = fake::failure(call);
  if (f) last_error = fake::env("FAKE_NCCL_LAST_ERROR", "fake NCCL: the call failed");
  return f;
}
void run_pending() {
  if (pending.empty()) return;
  const std::size_t count = pending[0].count;
  std::vector<float> sum(count, 0.0f);
  for (const auto& op : pending)
    for (std::size_t i = 0; i < count; ++i) sum[i] += op.send[i];
  for (const auto& op : pending) {
    std::memcpy(op.recv, sum.data(), count * sizeof(float));
    fake::advance(op.stream, count * 4.0, 200);
  }
  pending.clear();
}

bool io_all(int fd, void* data, std::size_t n, bool out) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pf{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
    if (::poll(&pf, 1, 20000) != 1) return false;
    ssize_t k = out ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// The root: every rank's floats in, their sum out to each, until a rank leaves.
void serve_root(int listen_fd, int nranks) {
  std::vector<int> ranks(nranks, -1);
  for (int got = 0; got < nranks;) {
    pollfd pf{listen_fd, POLLIN, 0};
    if (::poll(&pf, 1, 30000) != 1) break;
    int fd = ::accept(listen_fd, nullptr, nullptr);
    std::int32_t r = -1;
    if (fd < 0 || !io_all(fd, &r, sizeof r, false) || r < 0 || r >= nranks || ranks[r] >= 0) {
      if (fd >= 0) ::close(fd);
      continue;
    }
    ranks[r] = fd;
    ++got;
  }
  ::close(listen_fd);
  std::vector<float> sum, part;
  for (bool ok = std::all_of(ranks.begin(), ranks.end(), [](int fd) { return fd >= 0; }); ok;) {
    std::uint64_t count = 0;
    for (int r = 0; r < nranks && ok; ++r) {
      std::uint64_t c = 0;
      ok = io_all(ranks[r], &c, sizeof c, false) && c <= (1u << 28) && (r == 0 || c == count);
      count = c;
      part.resize(c);
      if (r == 0) sum.assign(c, 0.0f);
      ok = ok && io_all(ranks[r], part.data(), c * sizeof(float), false);
      for (std::uint64_t i = 0; ok && i < c; ++i) sum[i] += part[i];
    }
    // Rank 0 (this process) last: once it has its result it may exit, and the root with it.
    for (int r = nranks - 1; r >= 0 && ok; --r) ok = io_all(ranks[r], sum.data(), count * sizeof(float), true);
  }
  for (int fd : ranks)
    if (fd >= 0) ::close(fd);
}

}  // namespace

extern "C" {

int ncclGetUniqueId(UniqueId* id) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = fake::node_ipv4();
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 2;
  }
  std::memset(id->internal, 0, sizeof id->internal);
  char ip[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  std::snprintf(id->internal, sizeof id->internal, "fakenccl %s %d", ip, ntohs(a.sin_port));
  // Two ranks: the fabric test's pairs. The id's bytes carry no rank count, as NCCL's.
  std::thread(serve_root, fd, std::atoi(fake::env("FAKE_NCCL_NRANKS", "2").c_str())).detach();
  return 0;
}

int ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank) {
  if (int f = fail("ncclCommInitRank")) return f;
  char ip[64] = "";
  int port = 0;
  id.internal[sizeof id.internal - 1] = 0;
  if (std::sscanf(id.internal, "fakenccl %63s %d", ip, &port) != 2 || rank < 0 || rank >= nranks) return 4;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::inet_pton(AF_INET, ip, &a.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    last_error = "fake NCCL: cannot reach the bootstrap root";
    return 6;
  }
  std::int32_t r = rank;
  if (!io_all(fd, &r, sizeof r, true)) {
    ::close(fd);
    return 6;
  }
  auto* c = new Comm{rank, nranks, fd};
  *comm = c;
  log_info("comm initialized across processes");
  return 0;
}

int ncclGetVersion(int* v) {
  *v = 22809;
  return 0;
}
const char* ncclGetErrorString(int r) {
  switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default: return "internal error - please report this issue to the NCCL developers";
  }
}
const char* ncclGetLastError(void*) { return last_error.c_str(); }
int ncclCommInitAll(void** comms, int n, const int*) {
  log_info("NCCL version 2.28.9+cuda12.8");
  log_info("Bootstrap: Using eth0:10.0.0.1<0>");
  if (int f = fail("ncclCommInitAll")) return f;
  if (fake::env("FAKE_MIG") == "1") {
    last_error = "MIG is not supported";
    return 5;
  }
  for (int i = 0; i < n; ++i) comms[i] = new Comm{i, n};
  log_info("comm initialized");
  log_info("Init COMPLETE");
  return 0;
}
int ncclCommDestroy(void* c) {
  fake::maybe_hang("ncclCommDestroy");
  fake::block_if_kernels_stuck();
  if (static_cast<Comm*>(c)->fd >= 0) ::close(static_cast<Comm*>(c)->fd);
  delete static_cast<Comm*>(c);
  return 0;
}
int ncclCommAbort(void* c) {
  if (static_cast<Comm*>(c)->fd >= 0) ::close(static_cast<Comm*>(c)->fd);
  delete static_cast<Comm*>(c);
  return 0;
}
int ncclGroupStart() {
  ++group_depth;
  return 0;
}
int ncclGroupEnd() {
  if (int f = fail("ncclGroupEnd")) return f;
  if (--group_depth == 0) run_pending();
  return 0;
}
int ncclAllReduce(const void* send, void* recv, std::size_t count, int, int, void* comm, void* stream) {
  if (int f = fail("ncclAllReduce")) return f;
  if (auto* c = static_cast<Comm*>(comm); c && c->fd >= 0) {  // across processes: through the root, now
    std::uint64_t n = count;
    if (!io_all(c->fd, &n, sizeof n, true) || !io_all(c->fd, const_cast<void*>(send), count * sizeof(float), true) ||
        !io_all(c->fd, recv, count * sizeof(float), false)) {
      last_error = "fake NCCL: the connection to the root broke";
      return 6;
    }
    return 0;
  }
  pending.push_back({static_cast<const float*>(send), static_cast<float*>(recv), count, stream});
  if (group_depth == 0) run_pending();
  return 0;
}

}  // extern "C"
