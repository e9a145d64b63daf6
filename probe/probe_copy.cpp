#include "probe/probe_copy.h"

#include <algorithm>
#include <memory>

#include "probe/gpu_join.h"
#include "probe/probe_failure.h"
#include "probe/probe_json.h"

namespace gpudiag::probe {

nlohmann::json device_copy_bandwidth(CudaSession& s, std::size_t bytes, int iters) {
  const Cuda& cu = s.cu();
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < s.gpus().size(); ++i) {
    DeviceBuffer src(s, i, bytes), dst(s, i, bytes);
    const GpuSlot& g = s.gpus()[i];
    s.use(i);
    check_cuda(cu, cu.memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, g.stream), "cuMemcpyDtoDAsync");  // warm-up
    check_cuda(cu, cu.event_record(g.start, g.stream), "cuEventRecord");
    for (int k = 0; k < iters; ++k)
      check_cuda(cu, cu.memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, g.stream), "cuMemcpyDtoDAsync");
    check_cuda(cu, cu.event_record(g.stop, g.stream), "cuEventRecord");
    double ms = s.elapsed_ms(i);
    out.push_back({{"gpu", i}, {"bytes", bytes}, {"iters", iters},
                   {"gbps", ms > 0 ? static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9 : 0.0}});
  }
  return out;
}

nlohmann::json describe_joined(const CudaSession& s, const std::vector<int>& nvml_of) {
  nlohmann::json gpus = s.describe();
  for (std::size_t i = 0; i < gpus.size(); ++i)
    gpus[i][probe_json::kNvmlIndex] = nvml_of[i] >= 0 ? nlohmann::json(nvml_of[i]) : nlohmann::json(nullptr);
  return gpus;
}

nlohmann::json missing_from_cuda(const std::vector<NvmlGpu>& nvml, const std::vector<int>& nvml_of) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t n = 0; n < nvml.size(); ++n)
    if (std::find(nvml_of.begin(), nvml_of.end(), static_cast<int>(n)) == nvml_of.end())
      out.push_back({{"index", n}, {"pci_bus_id", nvml[n].pci_bus_id}, {"uuid", nvml[n].uuid}});
  return out;
}

nlohmann::json probe_peer_bandwidth(const ProbeOptions& opts, const std::vector<NvmlGpu>& nvml) {
  CudaSession s(opts.cuda_path, opts.deadline);
  if (!s.error().is_null()) return s.error();
  const Cuda& cu = s.cu();
  const std::size_t n = s.gpus().size();
  const std::size_t bytes = opts.copy_bytes;
  constexpr int kIters = 5;
  nlohmann::json access = nlohmann::json::array(), gbps = nlohmann::json::array();
  try {
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    for (std::size_t i = 0; i < n; ++i) bufs.push_back(std::make_unique<DeviceBuffer>(s, i, bytes));
    for (std::size_t i = 0; i < n; ++i) {
      nlohmann::json arow = nlohmann::json::array(), brow = nlohmann::json::array();
      for (std::size_t j = 0; j < n; ++j) {
        if (i == j) {
          arow.push_back(true);
          brow.push_back(nullptr);
          continue;
        }
        int can = 0;
        check_cuda(cu, cu.can_access_peer(&can, s.gpus()[i].dev, s.gpus()[j].dev), "cuDeviceCanAccessPeer");
        if (can) {
          s.use(i);
          CUresult r = cu.enable_peer_access(s.gpus()[j].ctx, 0);
          if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) check_cuda(cu, r, "cuCtxEnablePeerAccess");
        }
        // Without peer access the copy still works, staged through host memory: timing
        // it shows how slow that path is.
        const GpuSlot& g = s.gpus()[i];
        s.use(i);
        auto copy = [&] {
          check_cuda(cu, cu.memcpy_peer_async(bufs[j]->ptr(), s.gpus()[j].ctx, bufs[i]->ptr(), g.ctx, bytes, g.stream),
                     "cuMemcpyPeerAsync");
        };
        copy();
        check_cuda(cu, cu.event_record(g.start, g.stream), "cuEventRecord");
        for (int k = 0; k < kIters; ++k) copy();
        check_cuda(cu, cu.event_record(g.stop, g.stream), "cuEventRecord");
        double ms = s.elapsed_ms(i);
        arow.push_back(can != 0);
        brow.push_back(ms > 0 ? static_cast<double>(bytes) * kIters / (ms * 1e-3) / 1e9 : 0.0);
      }
      access.push_back(arow);
      gbps.push_back(brow);
    }
  } catch (const GpuCallError& e) {
    return gpu_call_failure(e, "", "look at `dmesg` for Xid errors and at `nvidia-smi topo -p2p r`");
  }
  // Measured in CUDA order; reported in NVML order.
  const std::vector<int> nvml_of = match_cuda_to_nvml(s.gpus(), nvml);
  const std::size_t m = nvml.size();
  nlohmann::json access_n = nlohmann::json::array(), gbps_n = nlohmann::json::array();
  for (std::size_t a = 0; a < m; ++a) {
    access_n.push_back(nlohmann::json::array());
    gbps_n.push_back(nlohmann::json::array());
    for (std::size_t b = 0; b < m; ++b) {
      access_n[a].push_back(nullptr);
      gbps_n[a].push_back(nullptr);
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (nvml_of[i] >= 0 && nvml_of[j] >= 0) {
        access_n[nvml_of[i]][nvml_of[j]] = access[i][j];
        gbps_n[nvml_of[i]][nvml_of[j]] = gbps[i][j];
      }
  return {{probe_json::kGpus, describe_joined(s, nvml_of)}, {probe_json::kBytes, bytes}, {probe_json::kPeerAccess, access_n},
          {probe_json::kGbps, gbps_n},
          {probe_json::kMissingFromCuda, missing_from_cuda(nvml, nvml_of)}};
}

}  // namespace gpudiag::probe
