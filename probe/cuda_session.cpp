#include "probe/cuda_session.h"

#include <cstdio>
#include <thread>

#include "probe/probe_failure.h"
#include "probe/probe_options.h"
#include "probe/probe_json.h"

namespace gpudiag::probe {

namespace {

std::string uuid_text(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char out[48];
  std::snprintf(out, sizeof out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

}  // namespace

CudaSession::CudaSession(const std::string& cuda_path, Deadline deadline)
    : cu_(load_cuda(cuda_path)), deadline_(deadline) {
  if (!cu_.lib) {
    error_ = probe_error("library", "cannot load the CUDA driver library: " + describe_attempts(cu_.lib),
                         "install the NVIDIA driver, or set gpu.libraries.cuda in gpudiag.yaml");
    return;
  }
  if (!cu_.missing.empty()) {
    error_ = probe_error("library", "the CUDA driver at " + cu_.lib.path + " lacks " + cu_.missing,
                         kOldDriverHint);
    return;
  }
  CUresult r = cu_.init(0);
  if (r != CUDA_SUCCESS) {
    error_ = cuda_init_failure(r, cu_.err(r));
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
      CUuuid uuid{};
      if (cu_.device_uuid(&uuid, g.dev) == CUDA_SUCCESS) g.uuid = uuid_text(uuid);
      check_cuda(cu_, cu_.ctx_retain(&g.ctx, g.dev), "cuDevicePrimaryCtxRetain");
      check_cuda(cu_, cu_.ctx_set_current(g.ctx), "cuCtxSetCurrent");
      check_cuda(cu_, cu_.stream_create(&g.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      check_cuda(cu_, cu_.event_create(&g.start, CU_EVENT_DEFAULT), "cuEventCreate");
      check_cuda(cu_, cu_.event_create(&g.stop, CU_EVENT_DEFAULT), "cuEventCreate");
      gpus_.push_back(g);
    }
  } catch (GpuCallError& e) {
    e.message = "GPU " + std::to_string(gpus_.size()) + ": " + e.message;
    error_ = gpu_call_failure(e, "", "look at `dmesg` for Xid errors; reset or replace the GPU");
    gpus_.clear();
  }
}

void CudaSession::use(std::size_t i) const { check_cuda(cu_, cu_.ctx_set_current(gpus_.at(i).ctx), "cuCtxSetCurrent"); }

float CudaSession::elapsed_ms(std::size_t i) const {
  wait(i, gpus_[i].stop, "waiting for the GPU's work");
  float ms = 0;
  check_cuda(cu_, cu_.event_elapsed(&ms, gpus_[i].start, gpus_[i].stop), "cuEventElapsedTime");
  return ms;
}

void CudaSession::wait(std::size_t i, CUevent ev, const char* what) const {
  // cuEventSynchronize has no timeout: a stuck kernel would hold the probe until
  // gpudiag-health kills it, and the diagnosis would be lost.
  use(i);
  for (;;) {
    CUresult r = cu_.event_query(ev);
    if (r == CUDA_SUCCESS) return;
    if (r != CUDA_ERROR_NOT_READY) check_cuda(cu_, r, "cuEventQuery");
    if (std::chrono::steady_clock::now() >= deadline_) {
      poison_gpu();
      throw GpuCallError{"GPU " + std::to_string(i) + " (" + gpus_[i].pci_bus_id + "): " + what +
                         " did not finish in time: a kernel is stuck"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

nlohmann::json CudaSession::describe() const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < gpus_.size(); ++i)
    out.push_back({{probe_json::kIndex, i}, {probe_json::kGpuName, gpus_[i].name}, {probe_json::kPciBusId, gpus_[i].pci_bus_id}, {probe_json::kUuid, gpus_[i].uuid}});
  return out;
}

DeviceBuffer::DeviceBuffer(const CudaSession& s, std::size_t gpu, std::size_t bytes) : s_(s), gpu_(gpu) {
  s.use(gpu);
  // The size is in the message: an out-of-memory error is either a GPU shared with
  // someone else or a check asking for more than the GPU has (seen on an H100 with
  // nccl.bytes: 48G, which needs 96 GB for send and receive).
  const std::string what = "cuMemAlloc of " + std::to_string(bytes >> 20) + " MiB on GPU " + std::to_string(gpu);
  check_cuda(s.cu(), s.cu().mem_alloc(&ptr_, bytes), what.c_str());
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_ || gpu_poisoned()) return;
  if (s_.cu().ctx_set_current(s_.gpus()[gpu_].ctx) == CUDA_SUCCESS) s_.cu().mem_free(ptr_);
}

}  // namespace gpudiag::probe
