#pragma once
// The CUDA driver API (libcuda.so.1, shipped with the driver), loaded at run time. The
// driver API rather than libcudart: every GPU node has the driver, not every node has
// a toolkit. The few types, constants and entry points the probe uses are declared
// here, so that the build needs no toolkit; tests/compat/check_probe_decls.cpp checks
// every one of them against cuda.h where the toolkit is installed. The exported names
// are the versioned ones that cuda.h's macros select (cuMemAlloc -> cuMemAlloc_v2).
#include <cstddef>
#include <string>

#include "util/lib_loader.h"

namespace gpudiag::probe {

// The values are CUresult's (cuda.h): the ABI, stable across CUDA versions.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_SYSTEM_NOT_READY = 802,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CUDA_ERROR_UNKNOWN = 999,
};
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // 64-bit builds only (cuda.h's CUdeviceptr_v2)
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
struct CUuuid {
  char bytes[16];
};
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DEFAULT = 0x0;

// One alias and one exported name per entry point: Cu<Name> and kCu<Name>.
namespace cu {
using Init = CUresult (*)(unsigned);
using DriverGetVersion = CUresult (*)(int*);
using GetErrorString = CUresult (*)(CUresult, const char**);
using DeviceGetCount = CUresult (*)(int*);
using DeviceGet = CUresult (*)(CUdevice*, int);
using DeviceGetName = CUresult (*)(char*, int, CUdevice);
using DeviceGetPCIBusId = CUresult (*)(char*, int, CUdevice);
using DeviceGetUuid = CUresult (*)(CUuuid*, CUdevice);
using DevicePrimaryCtxRetain = CUresult (*)(CUcontext*, CUdevice);
using DevicePrimaryCtxRelease = CUresult (*)(CUdevice);
using CtxSetCurrent = CUresult (*)(CUcontext);
using DeviceCanAccessPeer = CUresult (*)(int*, CUdevice, CUdevice);
using CtxEnablePeerAccess = CUresult (*)(CUcontext, unsigned);
using MemAlloc = CUresult (*)(CUdeviceptr*, std::size_t);
using MemFree = CUresult (*)(CUdeviceptr);
using MemsetD32Async = CUresult (*)(CUdeviceptr, unsigned, std::size_t, CUstream);
using MemcpyDtoH = CUresult (*)(void*, CUdeviceptr, std::size_t);
using MemcpyDtoDAsync = CUresult (*)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream);
using MemcpyPeerAsync = CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, std::size_t, CUstream);
using StreamCreate = CUresult (*)(CUstream*, unsigned);
using StreamDestroy = CUresult (*)(CUstream);
using EventCreate = CUresult (*)(CUevent*, unsigned);
using EventRecord = CUresult (*)(CUevent, CUstream);
using EventQuery = CUresult (*)(CUevent);
using EventElapsedTime = CUresult (*)(float*, CUevent, CUevent);
using EventDestroy = CUresult (*)(CUevent);

// The names cuda.h's macros select on a 64-bit build without per-thread streams.
constexpr const char kInit[] = "cuInit";
constexpr const char kDriverGetVersion[] = "cuDriverGetVersion";
constexpr const char kGetErrorString[] = "cuGetErrorString";
constexpr const char kDeviceGetCount[] = "cuDeviceGetCount";
constexpr const char kDeviceGet[] = "cuDeviceGet";
constexpr const char kDeviceGetName[] = "cuDeviceGetName";
constexpr const char kDeviceGetPCIBusId[] = "cuDeviceGetPCIBusId";
constexpr const char kDeviceGetUuid[] = "cuDeviceGetUuid_v2";
constexpr const char kDevicePrimaryCtxRetain[] = "cuDevicePrimaryCtxRetain";
constexpr const char kDevicePrimaryCtxRelease[] = "cuDevicePrimaryCtxRelease_v2";
constexpr const char kCtxSetCurrent[] = "cuCtxSetCurrent";
constexpr const char kDeviceCanAccessPeer[] = "cuDeviceCanAccessPeer";
constexpr const char kCtxEnablePeerAccess[] = "cuCtxEnablePeerAccess";
constexpr const char kMemAlloc[] = "cuMemAlloc_v2";
constexpr const char kMemFree[] = "cuMemFree_v2";
constexpr const char kMemsetD32Async[] = "cuMemsetD32Async";
constexpr const char kMemcpyDtoH[] = "cuMemcpyDtoH_v2";
constexpr const char kMemcpyDtoDAsync[] = "cuMemcpyDtoDAsync_v2";
constexpr const char kMemcpyPeerAsync[] = "cuMemcpyPeerAsync";
constexpr const char kStreamCreate[] = "cuStreamCreate";
constexpr const char kStreamDestroy[] = "cuStreamDestroy_v2";
constexpr const char kEventCreate[] = "cuEventCreate";
constexpr const char kEventRecord[] = "cuEventRecord";
constexpr const char kEventQuery[] = "cuEventQuery";
constexpr const char kEventElapsedTime[] = "cuEventElapsedTime_v2";
constexpr const char kEventDestroy[] = "cuEventDestroy_v2";
// Drivers before CUDA 12.8 (R535, R550) export only these; same signatures.
constexpr const char kEventElapsedTimeV1[] = "cuEventElapsedTime";
constexpr const char kDeviceGetUuidV1[] = "cuDeviceGetUuid";
}  // namespace cu

struct Cuda {
  Library lib;
  std::string missing;
  cu::Init init = nullptr;
  cu::DriverGetVersion driver_version = nullptr;
  cu::GetErrorString error_string = nullptr;
  cu::DeviceGetCount device_count = nullptr;
  cu::DeviceGet device_get = nullptr;
  cu::DeviceGetName device_name = nullptr;
  cu::DeviceGetPCIBusId pci_bus_id = nullptr;
  cu::DeviceGetUuid device_uuid = nullptr;
  cu::DevicePrimaryCtxRetain ctx_retain = nullptr;
  cu::DevicePrimaryCtxRelease ctx_release = nullptr;
  cu::CtxSetCurrent ctx_set_current = nullptr;
  cu::DeviceCanAccessPeer can_access_peer = nullptr;
  cu::CtxEnablePeerAccess enable_peer_access = nullptr;
  cu::MemAlloc mem_alloc = nullptr;
  cu::MemFree mem_free = nullptr;
  cu::MemsetD32Async memset_d32_async = nullptr;
  cu::MemcpyDtoH memcpy_dtoh = nullptr;
  cu::MemcpyDtoDAsync memcpy_dtod_async = nullptr;
  cu::MemcpyPeerAsync memcpy_peer_async = nullptr;
  cu::StreamCreate stream_create = nullptr;
  cu::StreamDestroy stream_destroy = nullptr;
  cu::EventCreate event_create = nullptr;
  cu::EventRecord event_record = nullptr;
  cu::EventQuery event_query = nullptr;
  cu::EventElapsedTime event_elapsed = nullptr;
  cu::EventDestroy event_destroy = nullptr;

  std::string err(CUresult r) const;
};

Cuda load_cuda(const std::string& configured);

// Thrown by the probe's CUDA and NCCL wrappers; `what` names the call, `cuda` is the
// CUDA code when a CUDA call failed (0 otherwise).
struct GpuCallError {
  std::string message;
  int cuda = 0;
};
// Throws GpuCallError naming `what` unless r is CUDA_SUCCESS. After the first failure
// the driver is not asked to free anything (gpu_poisoned()): with a kernel stuck,
// cuMemFree and ncclCommDestroy block forever, and the diagnosis would never print.
void check_cuda(const Cuda& cu, CUresult r, const char* what);
bool gpu_poisoned();
void poison_gpu();

}  // namespace gpudiag::probe
