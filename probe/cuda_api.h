#pragma once
// The CUDA driver API (libcuda.so.1, shipped with the driver), loaded at run time. The
// driver API rather than libcudart: every GPU node has the driver, not every node has
// a toolkit. Types come from the toolkit's cuda.h; the exported names are the
// versioned ones that cuda.h's macros select (cuMemAlloc -> cuMemAlloc_v2).
#include <cuda.h>

#include <string>

#include "probe/lib_loader.h"

namespace gpudiag::probe {

struct Cuda {
  Library lib;
  std::string missing;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_version = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;
  decltype(&::cuDeviceGetCount) device_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_name = nullptr;
  decltype(&::cuDeviceGetPCIBusId) pci_bus_id = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) ctx_release = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuDeviceCanAccessPeer) can_access_peer = nullptr;
  decltype(&::cuCtxEnablePeerAccess) enable_peer_access = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemsetD32Async) memset_d32_async = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuMemcpyDtoDAsync) memcpy_dtod_async = nullptr;
  decltype(&::cuMemcpyPeerAsync) memcpy_peer_async = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamSynchronize) stream_sync = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_sync = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;

  std::string err(CUresult r) const;
};

Cuda load_cuda(const std::string& configured);

// Thrown by the probe's CUDA and NCCL wrappers; `what` names the call.
struct GpuCallError {
  std::string message;
};
// Throws GpuCallError naming `what` unless r is CUDA_SUCCESS.
void check_cuda(const Cuda& cu, CUresult r, const char* what);

}  // namespace gpudiag::probe
