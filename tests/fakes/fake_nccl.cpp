// A fake libnccl.so.2: ncclCommInitAll over the fake CUDA devices, grouped all_reduce
// (sum of floats, done at ncclGroupEnd on host memory), and NCCL's habit of logging to
// stdout when NCCL_DEBUG is set.
#include <cstdio>
#include <vector>

#include "fake_driver.h"

namespace {

struct Comm {
  int rank, nranks;
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

}  // namespace

extern "C" {

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
  delete static_cast<Comm*>(c);
  return 0;
}
int ncclCommAbort(void* c) {
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
int ncclAllReduce(const void* send, void* recv, std::size_t count, int, int, void*, void* stream) {
  if (int f = fail("ncclAllReduce")) return f;
  pending.push_back({static_cast<const float*>(send), static_cast<float*>(recv), count, stream});
  if (group_depth == 0) run_pending();
  return 0;
}

}  // extern "C"
