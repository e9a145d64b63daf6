#include "probe/cuda_session.h"

#include "probe/probe_options.h"

namespace gpudiag::probe {

CudaSession::CudaSession(const std::string& cuda_path) : cu_(load_cuda(cuda_path)) {
  if (!cu_.lib) {
    error_ = probe_error("library", "cannot load the CUDA driver library: " + describe_attempts(cu_.lib),
                         "install the NVIDIA driver, or set gpu.libraries.cuda in gpudiag.yaml");
    return;
  }
  if (!cu_.missing.empty()) {
    error_ = probe_error("library", "the CUDA driver at " + cu_.lib.path + " lacks " + cu_.missing,
                         "the driver is older than CUDA 12.8: upgrade it");
    return;
  }
  CUresult r = cu_.init(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    error_ = probe_error("no_gpu", "CUDA sees no GPU: " + cu_.err(r), "check `nvidia-smi` and the job's device cgroup");
    return;
  }
  if (r != CUDA_SUCCESS) {
    error_ = probe_error("driver", "cuInit failed: " + cu_.err(r), "look at `dmesg` (Xid errors) and `nvidia-smi`");
    return;
  }
  int n = 0;
  if ((r = cu_.device_count(&n)) != CUDA_SUCCESS || n <= 0) {
    error_ = probe_error("no_gpu", "CUDA sees no GPU", "check `nvidia-smi`");
    return;
  }
  try {
    for (int i = 0; i < n; ++i) {
      GpuSlot g;
      check_cuda(cu_, cu_.device_get(&g.dev, i), "cuDeviceGet");
      char buf[128] = {};
      if (cu_.device_name(buf, sizeof buf, g.dev) == CUDA_SUCCESS) g.name = buf;
      if (cu_.pci_bus_id(buf, sizeof buf, g.dev) == CUDA_SUCCESS) g.pci_bus_id = buf;
      check_cuda(cu_, cu_.ctx_retain(&g.ctx, g.dev), "cuDevicePrimaryCtxRetain");
      check_cuda(cu_, cu_.ctx_set_current(g.ctx), "cuCtxSetCurrent");
      check_cuda(cu_, cu_.stream_create(&g.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      check_cuda(cu_, cu_.event_create(&g.start, CU_EVENT_DEFAULT), "cuEventCreate");
      check_cuda(cu_, cu_.event_create(&g.stop, CU_EVENT_DEFAULT), "cuEventCreate");
      gpus_.push_back(g);
    }
  } catch (const GpuCallError& e) {
    error_ = probe_error("gpu", "GPU " + std::to_string(gpus_.size()) + ": " + e.message,
                         "look at `dmesg` for Xid errors; reset or replace the GPU");
    gpus_.clear();
  }
}

void CudaSession::use(std::size_t i) const { check_cuda(cu_, cu_.ctx_set_current(gpus_.at(i).ctx), "cuCtxSetCurrent"); }

float CudaSession::elapsed_ms(std::size_t i) const {
  use(i);
  check_cuda(cu_, cu_.event_sync(gpus_[i].stop), "cuEventSynchronize");
  float ms = 0;
  check_cuda(cu_, cu_.event_elapsed(&ms, gpus_[i].start, gpus_[i].stop), "cuEventElapsedTime");
  return ms;
}

nlohmann::json CudaSession::describe() const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < gpus_.size(); ++i)
    out.push_back({{"index", i}, {"name", gpus_[i].name}, {"pci_bus_id", gpus_[i].pci_bus_id}});
  return out;
}

DeviceBuffer::DeviceBuffer(const CudaSession& s, std::size_t gpu, std::size_t bytes) : s_(s), gpu_(gpu) {
  s.use(gpu);
  check_cuda(s.cu(), s.cu().mem_alloc(&ptr_, bytes), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  if (s_.cu().ctx_set_current(s_.gpus()[gpu_].ctx) == CUDA_SUCCESS) s_.cu().mem_free(ptr_);
}

}  // namespace gpudiag::probe
