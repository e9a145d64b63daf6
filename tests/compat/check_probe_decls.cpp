// The probe declares the CUDA driver and NCCL types, constants and entry points it uses
// (probe/cuda_api.h, probe/nccl_api.h) so that it builds without a CUDA toolkit. Built
// only where the toolkit's cuda.h and nccl.h exist, this file checks those declarations
// against them at compile time: each signature (with the probe's types mapped to the
// toolkit's), each constant, each type's size, and the exported name that cuda.h's
// macros select (cuMemAlloc -> cuMemAlloc_v2). A mismatch fails the build.
#include <cuda.h>
#include <nccl.h>

#include <cstdio>
#include <string_view>
#include <type_traits>

#include "probe/cuda_api.h"
#include "probe/nccl_api.h"

namespace P = gpudiag::probe;

template <class T>
struct Real {
  using type = T;
};
template <class T>
struct Real<T*> {
  using type = typename Real<T>::type*;
};
template <class T>
struct Real<const T> {
  using type = const typename Real<T>::type;
};
template <class R, class... A>
struct Real<R (*)(A...)> {
  using type = typename Real<R>::type (*)(typename Real<A>::type...);
};
#define GPUDIAG_MAP(ours, theirs) \
  template <>                     \
  struct Real<ours> {             \
    using type = theirs;          \
  };
GPUDIAG_MAP(P::CUresult, ::CUresult)
GPUDIAG_MAP(P::CUctx_st, ::CUctx_st)
GPUDIAG_MAP(P::CUstream_st, ::CUstream_st)
GPUDIAG_MAP(P::CUevent_st, ::CUevent_st)
GPUDIAG_MAP(P::CUuuid, ::CUuuid)
GPUDIAG_MAP(P::ncclResult_t, ::ncclResult_t)
GPUDIAG_MAP(P::ncclDataType_t, ::ncclDataType_t)
GPUDIAG_MAP(P::ncclRedOp_t, ::ncclRedOp_t)
GPUDIAG_MAP(P::ncclComm, ::ncclComm)
GPUDIAG_MAP(P::ncclUniqueId, ::ncclUniqueId)

#define GPUDIAG_STR2(x) #x
#define GPUDIAG_STR(x) GPUDIAG_STR2(x)

// Signature, and the versioned name the probe resolves.
#define CHECK_CU(Name)                                                                       \
  static_assert(std::is_same_v<Real<P::cu::Name>::type, decltype(&::cu##Name)>,             \
                "probe/cuda_api.h: cu" #Name " has the wrong signature");                    \
  static_assert(std::string_view(P::cu::k##Name) == GPUDIAG_STR(cu##Name),                 \
                "probe/cuda_api.h: cu" #Name " resolves the wrong exported name");
CHECK_CU(Init)
CHECK_CU(DriverGetVersion)
CHECK_CU(GetErrorString)
CHECK_CU(DeviceGetCount)
CHECK_CU(DeviceGet)
CHECK_CU(DeviceGetName)
CHECK_CU(DeviceGetPCIBusId)
CHECK_CU(DeviceGetUuid)
CHECK_CU(DevicePrimaryCtxRetain)
CHECK_CU(DevicePrimaryCtxRelease)
CHECK_CU(CtxSetCurrent)
CHECK_CU(DeviceCanAccessPeer)
CHECK_CU(CtxEnablePeerAccess)
CHECK_CU(MemAlloc)
CHECK_CU(MemFree)
CHECK_CU(MemsetD32Async)
CHECK_CU(MemcpyDtoH)
CHECK_CU(MemcpyDtoDAsync)
CHECK_CU(MemcpyPeerAsync)
CHECK_CU(StreamCreate)
CHECK_CU(StreamDestroy)
CHECK_CU(EventCreate)
CHECK_CU(EventRecord)
CHECK_CU(EventQuery)
CHECK_CU(EventElapsedTime)
CHECK_CU(EventDestroy)

#define CHECK_NCCL(Name)                                                                 \
  static_assert(std::is_same_v<Real<P::nccl::Name>::type, decltype(&::nccl##Name)>,     \
                "probe/nccl_api.h: nccl" #Name " has the wrong signature");
CHECK_NCCL(GetVersion)
CHECK_NCCL(GetErrorString)
CHECK_NCCL(GetLastError)
CHECK_NCCL(CommInitAll)
CHECK_NCCL(CommDestroy)
CHECK_NCCL(CommAbort)
CHECK_NCCL(AllReduce)
CHECK_NCCL(GroupStart)
CHECK_NCCL(GroupEnd)
CHECK_NCCL(GetUniqueId)
CHECK_NCCL(CommInitRank)

#define CHECK_VALUE(ours, theirs) \
  static_assert(static_cast<long long>(ours) == static_cast<long long>(theirs), #ours " differs from the toolkit's");
#define CHECK_CU_VALUE(name) CHECK_VALUE(P::name, ::name)
CHECK_CU_VALUE(CUDA_SUCCESS)
CHECK_CU_VALUE(CUDA_ERROR_INVALID_VALUE)
CHECK_CU_VALUE(CUDA_ERROR_OUT_OF_MEMORY)
CHECK_CU_VALUE(CUDA_ERROR_NOT_INITIALIZED)
CHECK_CU_VALUE(CUDA_ERROR_DEVICE_UNAVAILABLE)
CHECK_CU_VALUE(CUDA_ERROR_NO_DEVICE)
CHECK_CU_VALUE(CUDA_ERROR_INVALID_DEVICE)
CHECK_CU_VALUE(CUDA_ERROR_NOT_READY)
CHECK_CU_VALUE(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
CHECK_CU_VALUE(CUDA_ERROR_SYSTEM_NOT_READY)
CHECK_CU_VALUE(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
CHECK_CU_VALUE(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
CHECK_CU_VALUE(CUDA_ERROR_UNKNOWN)
CHECK_CU_VALUE(CU_STREAM_NON_BLOCKING)
CHECK_CU_VALUE(CU_EVENT_DEFAULT)
CHECK_VALUE(P::ncclSuccess, ::ncclSuccess)
CHECK_VALUE(P::ncclUnhandledCudaError, ::ncclUnhandledCudaError)
CHECK_VALUE(P::ncclSystemError, ::ncclSystemError)
CHECK_VALUE(P::ncclInternalError, ::ncclInternalError)
CHECK_VALUE(P::ncclInvalidArgument, ::ncclInvalidArgument)
CHECK_VALUE(P::ncclInvalidUsage, ::ncclInvalidUsage)
CHECK_VALUE(P::ncclRemoteError, ::ncclRemoteError)
CHECK_VALUE(P::ncclInProgress, ::ncclInProgress)
CHECK_VALUE(P::ncclFloat, ::ncclFloat)
CHECK_VALUE(P::ncclSum, ::ncclSum)

static_assert(std::is_same_v<P::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<P::CUdeviceptr, ::CUdeviceptr>);
static_assert(sizeof(P::CUuuid) == sizeof(::CUuuid));
static_assert(sizeof(P::CUresult) == sizeof(::CUresult));
static_assert(sizeof(P::ncclResult_t) == sizeof(::ncclResult_t));
static_assert(sizeof(P::ncclDataType_t) == sizeof(::ncclDataType_t));
static_assert(sizeof(P::ncclRedOp_t) == sizeof(::ncclRedOp_t));
static_assert(std::is_same_v<Real<P::CUstream>::type, ::cudaStream_t>, "NCCL's stream is CUDA's");

// NVML, where the toolkit ships nvml.h next to cuda.h: the entry points and constants the
// devices section added for clocks, temperature and PCIe replays (probe/nvml_api.h), and
// the clocks event bits that healthcheck/checks/gpu_driver_view.cpp decodes. The probe passes
// NVML's enums as int, so their size is checked too.
#if __has_include(<nvml.h>)
#include <nvml.h>

#include "probe/nvml_api.h"
static_assert(sizeof(::nvmlReturn_t) == sizeof(P::nvmlReturn_t));
static_assert(sizeof(::nvmlTemperatureSensors_t) == sizeof(int));
static_assert(sizeof(::nvmlTemperatureThresholds_t) == sizeof(int));
CHECK_VALUE(P::kNvmlTemperatureGpu, ::NVML_TEMPERATURE_GPU)
CHECK_VALUE(P::kNvmlTemperatureThresholdSlowdown, ::NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetTemperature),
                             ::nvmlReturn_t (*)(::nvmlDevice_t, ::nvmlTemperatureSensors_t, unsigned int*)>);
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetTemperatureThreshold),
                             ::nvmlReturn_t (*)(::nvmlDevice_t, ::nvmlTemperatureThresholds_t, unsigned int*)>);
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetPcieReplayCounter), ::nvmlReturn_t (*)(::nvmlDevice_t, unsigned int*)>);
#ifdef nvmlClocksThrottleReasonHwSlowdown  // the names before R535 (deprecated since)
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetCurrentClocksThrottleReasons),
                             ::nvmlReturn_t (*)(::nvmlDevice_t, unsigned long long*)>);
CHECK_VALUE(0x8, nvmlClocksThrottleReasonHwSlowdown)
CHECK_VALUE(0x20, nvmlClocksThrottleReasonSwThermalSlowdown)
CHECK_VALUE(0x40, nvmlClocksThrottleReasonHwThermalSlowdown)
CHECK_VALUE(0x80, nvmlClocksThrottleReasonHwPowerBrakeSlowdown)
#endif
#ifdef nvmlClocksEventReasonHwSlowdown  // R535 on: the same bits and call, renamed
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetCurrentClocksEventReasons),
                             ::nvmlReturn_t (*)(::nvmlDevice_t, unsigned long long*)>);
CHECK_VALUE(0x8, nvmlClocksEventReasonHwSlowdown)
CHECK_VALUE(0x20, nvmlClocksEventReasonSwThermalSlowdown)
CHECK_VALUE(0x40, nvmlClocksEventReasonHwThermalSlowdown)
CHECK_VALUE(0x80, nvmlClocksEventReasonHwPowerBrakeSlowdown)
#endif
#endif

int main() {
  std::printf("probe declarations match cuda.h (CUDA %d) and nccl.h (NCCL %d.%d.%d)\n", CUDA_VERSION, NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH);
  return 0;
}
