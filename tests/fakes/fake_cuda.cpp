// A fake libcuda.so.1: the driver API entry points gpudiag-gpu-probe resolves, by their
// exported (versioned) names, for the node described in fake_driver.h. Built three
// ways: current, FAKE_CUDA_R535 (a 535/550 driver: no cuEventElapsedTime_v2) and
// FAKE_CUDA_ANCIENT (also no cuDevicePrimaryCtxRelease_v2, as before CUDA 11).
#include <cstdio>
#include <cstdlib>

#include "fake_driver.h"

namespace {

struct Ctx {
  int dev;
};
Ctx ctxs[64];
thread_local Ctx* current = nullptr;

int fail_or(const char* call, int dev = -1) {
  fake::maybe_hang(call);
  int f = dev >= 0 ? fake::failure(call, dev) : 0;
  if (!f) f = fake::failure(call);
  return f;
}
int current_dev() { return current ? current->dev : 0; }

}  // namespace

extern "C" {

int cuInit(unsigned) { return fail_or("cuInit"); }
int cuDriverGetVersion(int* v) {
  *v = 12080;
  return 0;
}
int cuGetErrorString(int r, const char** s) {
  switch (r) {
    case 0: *s = "no error"; break;
    case 2: *s = "out of memory"; break;
    case 46: *s = "CUDA-capable device(s) is/are busy or unavailable"; break;
    case 100: *s = "no CUDA-capable device is detected"; break;
    case 719: *s = "unspecified launch failure"; break;
    case 802: *s = "system not yet initialized"; break;
    case 803: *s = "system has unsupported display driver / cuda driver combination"; break;
    default: *s = "unknown error"; break;
  }
  return 0;
}
int cuDeviceGetCount(int* n) {
  *n = fake::cuda_count();
  return fail_or("cuDeviceGetCount");
}
int cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= fake::cuda_count()) return 101;
  *d = ordinal;
  return fail_or("cuDeviceGet", ordinal);
}
int cuDeviceGetName(char* buf, int len, int) {
  std::snprintf(buf, len, "%s", fake::env("FAKE_GPU_NAME", "NVIDIA H100 80GB HBM3").c_str());
  return 0;
}
int cuDeviceGetPCIBusId(char* buf, int len, int d) {
  std::snprintf(buf, len, "0000:%02X:00.0", fake::bus_of(fake::nvml_of_cuda(d)));
  return 0;
}
int cuDeviceGetUuid_v2(unsigned char* uuid, int d) {
  fake::uuid_of(fake::nvml_of_cuda(d), uuid);
  return 0;
}
int cuDeviceGetUuid(unsigned char* uuid, int d) { return cuDeviceGetUuid_v2(uuid, d); }
int cuDevicePrimaryCtxRetain(void** ctx, int d) {
  if (int f = fail_or("cuDevicePrimaryCtxRetain", d)) return f;
  ctxs[d].dev = d;
  *ctx = &ctxs[d];
  return 0;
}
#ifndef FAKE_CUDA_ANCIENT
int cuDevicePrimaryCtxRelease_v2(int) { return 0; }
#endif
int cuDevicePrimaryCtxRelease(int) { return 0; }
int cuCtxSetCurrent(void* ctx) {
  current = static_cast<Ctx*>(ctx);
  return 0;
}
int cuDeviceCanAccessPeer(int* can, int, int) {
  *can = 1;
  return fail_or("cuDeviceCanAccessPeer");
}
int cuCtxEnablePeerAccess(void*, unsigned) { return 0; }
int cuMemAlloc_v2(unsigned long long* p, std::size_t bytes) {
  if (int f = fail_or("cuMemAlloc", current_dev())) return f;
  *p = reinterpret_cast<unsigned long long>(std::calloc(1, bytes));
  return *p ? 0 : 2;
}
int cuMemFree_v2(unsigned long long p) {
  fake::maybe_hang("cuMemFree");
  fake::block_if_kernels_stuck();
  std::free(reinterpret_cast<void*>(p));
  return 0;
}
int cuMemsetD32Async(unsigned long long p, unsigned v, std::size_t n, void* stream) {
  auto* d = reinterpret_cast<unsigned*>(p);
  for (std::size_t i = 0; i < n; ++i) d[i] = v;
  fake::advance(stream, n * 4.0, 1000);
  return 0;
}
int cuMemcpyDtoH_v2(void* dst, unsigned long long src, std::size_t n) {
  fake::block_if_kernels_stuck();
  std::memcpy(dst, reinterpret_cast<void*>(src), n);
  return 0;
}
int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, std::size_t n, void* stream) {
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  fake::advance(stream, static_cast<double>(n), 1000);
  return 0;
}
int cuMemcpyPeerAsync(unsigned long long dst, void* dctx, unsigned long long src, void* sctx, std::size_t n,
                      void* stream) {
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  int a = fake::nvml_of_cuda(static_cast<Ctx*>(sctx)->dev), b = fake::nvml_of_cuda(static_cast<Ctx*>(dctx)->dev);
  std::string pair = fake::env("FAKE_SLOW_PAIR");
  bool slow = pair == std::to_string(a) + "," + std::to_string(b) || pair == std::to_string(b) + "," + std::to_string(a);
  fake::advance(stream, static_cast<double>(n), slow ? 5 : 100);
  return 0;
}
int cuStreamCreate(void** s, unsigned) {
  *s = new fake::Stream{current_dev(), 0};
  return 0;
}
int cuStreamSynchronize(void*) {
  fake::block_if_kernels_stuck();
  return 0;
}
int cuStreamDestroy_v2(void* s) {
  delete static_cast<fake::Stream*>(s);
  return 0;
}
int cuEventCreate(void** e, unsigned) {
  *e = new fake::Event{0, false};
  return 0;
}
int cuEventRecord(void* e, void* s) {
  auto* ev = static_cast<fake::Event*>(e);
  ev->at_us = s ? static_cast<fake::Stream*>(s)->clock_us : 0;
  ev->recorded = true;
  return 0;
}
int cuEventQuery(void*) { return fake::kernels_stuck() ? 600 : 0; }
int cuEventSynchronize(void*) {
  fake::block_if_kernels_stuck();
  return 0;
}
int cuEventElapsedTime(float* ms, void* a, void* b) {
  *ms = static_cast<float>((static_cast<fake::Event*>(b)->at_us - static_cast<fake::Event*>(a)->at_us) / 1000.0);
  return 0;
}
#ifndef FAKE_CUDA_R535
int cuEventElapsedTime_v2(float* ms, void* a, void* b) { return cuEventElapsedTime(ms, a, b); }
#endif
int cuEventDestroy_v2(void* e) {
  delete static_cast<fake::Event*>(e);
  return 0;
}

}  // extern "C"
