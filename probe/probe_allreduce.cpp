#include "probe/probe_allreduce.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "util/bus_bandwidth.h"
#include "probe/cuda_session.h"
#include "probe/gpu_join.h"
#include "probe/nccl_api.h"
#include "probe/nvml_session.h"
#include "probe/probe_copy.h"
#include "probe/probe_failure.h"
#include "probe/probe_json.h"

namespace gpudiag::probe {
namespace {

unsigned float_bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

class Comms {
 public:
  Comms(const Nccl& nc, int n) : nc_(nc), comms_(n, nullptr) {
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = i;
    check_nccl(nc, nc.comm_init_all(comms_.data(), n, devs.data()), "ncclCommInitAll");
    live_ = true;
  }
  // After a failure, abort: ncclCommDestroy waits for the communicator's kernels,
  // which may never finish.
  ~Comms() {
    if (live_)
      for (auto c : comms_) gpu_poisoned() ? nc_.comm_abort(c) : nc_.comm_destroy(c);
  }
  ncclComm_t operator[](std::size_t i) const { return comms_[i]; }

 private:
  const Nccl& nc_;
  std::vector<ncclComm_t> comms_;
  bool live_ = false;
};

// One grouped all_reduce across all GPUs.
void all_reduce(const Nccl& nc, CudaSession& s, const Comms& comms, const std::vector<std::unique_ptr<DeviceBuffer>>& send,
                const std::vector<std::unique_ptr<DeviceBuffer>>& recv, std::size_t count) {
  check_nccl(nc, nc.group_start(), "ncclGroupStart");
  for (std::size_t i = 0; i < s.gpus().size(); ++i)
    check_nccl(nc,
               nc.all_reduce(reinterpret_cast<const void*>(send[i]->ptr()), reinterpret_cast<void*>(recv[i]->ptr()), count,
                             ncclFloat, ncclSum, comms[i], s.gpus()[i].stream),
               "ncclAllReduce");
  check_nccl(nc, nc.group_end(), "ncclGroupEnd");
}

// Rank r sends r+1 everywhere, so every element of every result is n(n+1)/2, exact in
// float. Reading back all of a GiB per GPU would cost more than the test; 16 slices
// spread over the buffer plus its last element catch a wrong or partial reduction.
std::string verify(CudaSession& s, const std::vector<std::unique_ptr<DeviceBuffer>>& recv, std::size_t count) {
  const std::size_t n = s.gpus().size();
  const float want = static_cast<float>(n * (n + 1) / 2);
  constexpr std::size_t kSlices = 16, kSlice = 16384;
  std::vector<float> host(kSlice);
  for (std::size_t i = 0; i < n; ++i) {
    s.use(i);
    for (std::size_t k = 0; k <= kSlices; ++k) {
      std::size_t first = k == kSlices ? count - 1 : count / kSlices * k;
      std::size_t len = std::min(kSlice, count - first);
      check_cuda(s.cu(), s.cu().memcpy_dtoh(host.data(), recv[i]->ptr() + first * sizeof(float), len * sizeof(float)),
                 "cuMemcpyDtoH");
      for (std::size_t e = 0; e < len; ++e)
        if (host[e] != want)
          return "GPU " + std::to_string(i) + " element " + std::to_string(first + e) + " is " +
                 std::to_string(host[e]) + ", expected " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace

nlohmann::json probe_allreduce(const ProbeOptions& opts) {
  Nccl nc = load_nccl(opts.nccl_path);
  if (!nc.lib)
    return probe_error("library", "cannot load NCCL: " + describe_attempts(nc.lib),
                       "install NCCL (libnccl2), or set gpu.libraries.nccl in gpudiag.yaml");
  if (!nc.missing.empty())
    return probe_error("library", "NCCL at " + nc.lib.path + " lacks " + nc.missing,
                       "install NCCL 2.12 or later, or set gpu.libraries.nccl in gpudiag.yaml");
  int code = 0;
  nc.get_version(&code);

  // NVML's list is the node's: the ranks are checked against it, so that a GPU CUDA
  // cannot use is not silently left out of the all_reduce.
  std::vector<NvmlGpu> nvml;
  nlohmann::json nvml_error;
  {
    NvmlSession ns(opts.nvml_path);
    nvml_error = ns.error();
    nvml = ns.gpus();
  }
  if (std::string mig = mig_gpus(nvml); !mig.empty())
    return {{probe_json::kNcclVersion, nccl_version_text(code)}, {probe_json::kNotApplicable, "MIG mode is on (" + mig + ")"},
            {"nvml_gpus", nvml.size()}};

  CudaSession s(opts.cuda_path, opts.deadline);
  if (!s.error().is_null()) return s.error();
  const std::size_t n = s.gpus().size();
  const std::vector<int> nvml_of = match_cuda_to_nvml(s.gpus(), nvml);
  nlohmann::json out = {{probe_json::kNcclVersion, nccl_version_text(code)}, {"nccl_library", nc.lib.path},
                        {"cuda_library", s.cu().lib.path}, {probe_json::kGpus, describe_joined(s, nvml_of)}, {"ranks", n}};
  if (nvml_error.is_null()) {
    out["nvml_gpus"] = nvml.size();
    out[probe_json::kMissingFromCuda] = missing_from_cuda(nvml, nvml_of);
  } else {
    out["nvml_error"] = nvml_error[probe_json::kError];
  }
  int driver = 0;
  if (s.cu().driver_version(&driver) == CUDA_SUCCESS) out["cuda_driver_version"] = driver;
  try {
    const unsigned long long max_bytes = *std::max_element(opts.sizes.begin(), opts.sizes.end());
    Comms comms(nc, static_cast<int>(n));
    std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
    for (std::size_t i = 0; i < n; ++i) {
      send.push_back(std::make_unique<DeviceBuffer>(s, i, max_bytes));
      recv.push_back(std::make_unique<DeviceBuffer>(s, i, max_bytes));
    }
    nlohmann::json results = nlohmann::json::array();
    for (unsigned long long bytes : opts.sizes) {
      const std::size_t count = bytes / sizeof(float);
      for (std::size_t i = 0; i < n; ++i) {
        s.use(i);
        const auto& st = s.gpus()[i].stream;
        check_cuda(s.cu(), s.cu().memset_d32_async(send[i]->ptr(), float_bits(static_cast<float>(i + 1)), count, st),
                   "cuMemsetD32Async");
        check_cuda(s.cu(), s.cu().memset_d32_async(recv[i]->ptr(), 0, count, st), "cuMemsetD32Async");
      }
      for (int w = 0; w < opts.warmup; ++w) all_reduce(nc, s, comms, send, recv, count);
      for (std::size_t i = 0; i < n; ++i) {
        s.use(i);
        check_cuda(s.cu(), s.cu().event_record(s.gpus()[i].start, s.gpus()[i].stream), "cuEventRecord");
      }
      for (int it = 0; it < opts.iters; ++it) all_reduce(nc, s, comms, send, recv, count);
      for (std::size_t i = 0; i < n; ++i) {
        s.use(i);
        check_cuda(s.cu(), s.cu().event_record(s.gpus()[i].stop, s.gpus()[i].stream), "cuEventRecord");
      }
      // The collective ends when its slowest rank does.
      double ms = 0;
      for (std::size_t i = 0; i < n; ++i) ms = std::max(ms, static_cast<double>(s.elapsed_ms(i)));
      const double seconds = ms * 1e-3 / opts.iters;
      const double bytes_used = static_cast<double>(count * sizeof(float));
      const double algbw = algbw_gbps(bytes_used, seconds);
      std::string wrong = verify(s, recv, count);
      const AllreduceRun run{count * sizeof(float), seconds * 1e6, wrong.empty(), wrong};
      results.push_back(allreduce_run_json(
          run, opts.iters, opts.warmup, algbw,
          n > 1 ? std::optional<double>(allreduce_busbw_gbps(algbw, static_cast<int>(n))) : std::nullopt));
    }
    out[probe_json::kResults] = results;
    send.clear();
    recv.clear();
    out["device_copy"] = device_copy_bandwidth(s, std::min<unsigned long long>(max_bytes, 1ull << 30), 10);
  } catch (const GpuCallError& e) {
    nlohmann::json err = gpu_call_failure(e, nccl_last_error(nc, nullptr),
                                          "look at `dmesg` for Xid errors; run with NCCL_DEBUG=INFO");
    err.update(out);
    return err;
  }
  return out;
}

}  // namespace gpudiag::probe
