#include "probe/cuda_api.h"

// Two steps so that the macro argument expands to the versioned name first.
#define GPUDIAG_STR2(x) #x
#define GPUDIAG_STR(x) GPUDIAG_STR2(x)

namespace gpudiag::probe {

std::string Cuda::err(CUresult r) const {
  const char* s = nullptr;
  if (error_string) error_string(r, &s);
  return std::string(s ? s : "CUDA error") + " (" + std::to_string(static_cast<int>(r)) + ")";
}

void check_cuda(const Cuda& cu, CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw GpuCallError{std::string(what) + " failed: " + cu.err(r)};
}

Cuda load_cuda(const std::string& configured) {
  Cuda c;
  c.lib = load_library(configured, {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
                                    "/usr/local/nvidia/lib64/libcuda.so.1"});
  if (!c.lib) return c;
  std::string& m = c.missing;
  resolve(c.lib, c.init, {GPUDIAG_STR(cuInit)}, m);
  resolve(c.lib, c.driver_version, {GPUDIAG_STR(cuDriverGetVersion)}, m);
  resolve(c.lib, c.error_string, {GPUDIAG_STR(cuGetErrorString)}, m);
  resolve(c.lib, c.device_count, {GPUDIAG_STR(cuDeviceGetCount)}, m);
  resolve(c.lib, c.device_get, {GPUDIAG_STR(cuDeviceGet)}, m);
  resolve(c.lib, c.device_name, {GPUDIAG_STR(cuDeviceGetName)}, m);
  resolve(c.lib, c.pci_bus_id, {GPUDIAG_STR(cuDeviceGetPCIBusId)}, m);
  resolve(c.lib, c.ctx_retain, {GPUDIAG_STR(cuDevicePrimaryCtxRetain)}, m);
  resolve(c.lib, c.ctx_release, {GPUDIAG_STR(cuDevicePrimaryCtxRelease)}, m);
  resolve(c.lib, c.ctx_set_current, {GPUDIAG_STR(cuCtxSetCurrent)}, m);
  resolve(c.lib, c.can_access_peer, {GPUDIAG_STR(cuDeviceCanAccessPeer)}, m);
  resolve(c.lib, c.enable_peer_access, {GPUDIAG_STR(cuCtxEnablePeerAccess)}, m);
  resolve(c.lib, c.mem_alloc, {GPUDIAG_STR(cuMemAlloc)}, m);
  resolve(c.lib, c.mem_free, {GPUDIAG_STR(cuMemFree)}, m);
  resolve(c.lib, c.memset_d32_async, {GPUDIAG_STR(cuMemsetD32Async)}, m);
  resolve(c.lib, c.memcpy_dtoh, {GPUDIAG_STR(cuMemcpyDtoH)}, m);
  resolve(c.lib, c.memcpy_dtod_async, {GPUDIAG_STR(cuMemcpyDtoDAsync)}, m);
  resolve(c.lib, c.memcpy_peer_async, {GPUDIAG_STR(cuMemcpyPeerAsync)}, m);
  resolve(c.lib, c.stream_create, {GPUDIAG_STR(cuStreamCreate)}, m);
  resolve(c.lib, c.stream_sync, {GPUDIAG_STR(cuStreamSynchronize)}, m);
  resolve(c.lib, c.stream_destroy, {GPUDIAG_STR(cuStreamDestroy)}, m);
  resolve(c.lib, c.event_create, {GPUDIAG_STR(cuEventCreate)}, m);
  resolve(c.lib, c.event_record, {GPUDIAG_STR(cuEventRecord)}, m);
  resolve(c.lib, c.event_sync, {GPUDIAG_STR(cuEventSynchronize)}, m);
  // _v2 arrived with CUDA 12.8; the original has the same signature for older drivers.
  resolve(c.lib, c.event_elapsed, {GPUDIAG_STR(cuEventElapsedTime), "cuEventElapsedTime"}, m);
  resolve(c.lib, c.event_destroy, {GPUDIAG_STR(cuEventDestroy)}, m);
  return c;
}

}  // namespace gpudiag::probe
