#include "probe/cuda_api.h"

#include <atomic>

namespace gpudiag::probe {
namespace {
std::atomic<bool> poisoned{false};
}  // namespace

bool gpu_poisoned() { return poisoned.load(); }
void poison_gpu() { poisoned.store(true); }

std::string Cuda::err(CUresult r) const {
  const char* s = nullptr;
  if (error_string) error_string(r, &s);
  return std::string(s ? s : "CUDA error") + " (" + std::to_string(static_cast<int>(r)) + ")";
}

void check_cuda(const Cuda& cu, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  poison_gpu();
  throw GpuCallError{std::string(what) + " failed: " + cu.err(r), static_cast<int>(r)};
}

Cuda load_cuda(const std::string& configured) {
  Cuda c;
  c.lib = load_library(configured, {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
                                    "/usr/local/nvidia/lib64/libcuda.so.1"});
  if (!c.lib) return c;
  std::string& m = c.missing;
  resolve(c.lib, c.init, {cu::kInit}, m);
  resolve(c.lib, c.driver_version, {cu::kDriverGetVersion}, m);
  resolve(c.lib, c.error_string, {cu::kGetErrorString}, m);
  resolve(c.lib, c.device_count, {cu::kDeviceGetCount}, m);
  resolve(c.lib, c.device_get, {cu::kDeviceGet}, m);
  resolve(c.lib, c.device_name, {cu::kDeviceGetName}, m);
  resolve(c.lib, c.pci_bus_id, {cu::kDeviceGetPCIBusId}, m);
  resolve(c.lib, c.device_uuid, {cu::kDeviceGetUuid, cu::kDeviceGetUuidV1}, m);
  resolve(c.lib, c.ctx_retain, {cu::kDevicePrimaryCtxRetain}, m);
  resolve(c.lib, c.ctx_release, {cu::kDevicePrimaryCtxRelease}, m);
  resolve(c.lib, c.ctx_set_current, {cu::kCtxSetCurrent}, m);
  resolve(c.lib, c.can_access_peer, {cu::kDeviceCanAccessPeer}, m);
  resolve(c.lib, c.enable_peer_access, {cu::kCtxEnablePeerAccess}, m);
  resolve(c.lib, c.mem_alloc, {cu::kMemAlloc}, m);
  resolve(c.lib, c.mem_free, {cu::kMemFree}, m);
  resolve(c.lib, c.memset_d32_async, {cu::kMemsetD32Async}, m);
  resolve(c.lib, c.memcpy_dtoh, {cu::kMemcpyDtoH}, m);
  resolve(c.lib, c.memcpy_dtod_async, {cu::kMemcpyDtoDAsync}, m);
  resolve(c.lib, c.memcpy_peer_async, {cu::kMemcpyPeerAsync}, m);
  resolve(c.lib, c.stream_create, {cu::kStreamCreate}, m);
  resolve(c.lib, c.stream_destroy, {cu::kStreamDestroy}, m);
  resolve(c.lib, c.event_create, {cu::kEventCreate}, m);
  resolve(c.lib, c.event_record, {cu::kEventRecord}, m);
  resolve(c.lib, c.event_query, {cu::kEventQuery}, m);
  resolve(c.lib, c.event_elapsed, {cu::kEventElapsedTime, cu::kEventElapsedTimeV1}, m);
  resolve(c.lib, c.event_destroy, {cu::kEventDestroy}, m);
  return c;
}

}  // namespace gpudiag::probe
