#include "probe/probe_pair.h"

#include <chrono>
#include <cstring>
#include <memory>

#include "probe/cuda_session.h"
#include "probe/nccl_api.h"
#include "probe/probe_failure.h"

namespace gpudiag::probe {
namespace {

constexpr int kRanks = 2;

std::string to_hex(const ncclUniqueId& id) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : id.internal) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

bool from_hex(const std::string& text, ncclUniqueId& id) {
  if (text.size() != 2 * sizeof id.internal) return false;
  auto digit = [](char c) { return c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1); };
  for (std::size_t i = 0; i < sizeof id.internal; ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id.internal[i] = static_cast<char>(hi << 4 | lo);
  }
  return true;
}

unsigned float_bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace

nlohmann::json probe_pair(const ProbeOptions& opts, int rank, const std::string& id_hex,
                          const std::function<void(const std::string&)>& say_id) {
  Nccl nc = load_nccl(opts.nccl_path);
  if (!nc.lib) return probe_error("library", "cannot load NCCL: " + describe_attempts(nc.lib));
  if (!nc.missing.empty() || !nc.get_unique_id || !nc.comm_init_rank)
    return probe_error("library", "NCCL at " + nc.lib.path + " lacks what a pair needs");
  ncclUniqueId id{};
  if (rank == 0) {
    if (nc.get_unique_id(&id) != ncclSuccess) return probe_error("gpu", "ncclGetUniqueId failed");
    say_id(to_hex(id));  // before the GPU: the other node starts meanwhile
  } else if (!from_hex(id_hex, id)) {
    return probe_error("usage", "not a unique id");
  }
  CudaSession s(opts.cuda_path, opts.deadline);
  if (!s.error().is_null()) return s.error();
  const unsigned long long bytes = opts.sizes.front();
  const std::size_t count = bytes / sizeof(float);
  try {
    s.use(0);
    DeviceBuffer send(s, 0, bytes), recv(s, 0, bytes);
    const auto& gpu = s.gpus()[0];
    check_cuda(s.cu(), s.cu().memset_d32_async(send.ptr(), float_bits(static_cast<float>(rank + 1)), count, gpu.stream),
               "cuMemsetD32Async");
    ncclComm_t comm = nullptr;
    check_nccl(nc, nc.comm_init_rank(&comm, kRanks, id, rank), "ncclCommInitRank");
    auto run = [&] {
      check_nccl(nc,
                 nc.all_reduce(reinterpret_cast<const void*>(send.ptr()), reinterpret_cast<void*>(recv.ptr()), count,
                               ncclFloat, ncclSum, comm, gpu.stream),
                 "ncclAllReduce");
    };
    for (int i = 0; i < opts.warmup; ++i) run();
    check_cuda(s.cu(), s.cu().event_record(gpu.start, gpu.stream), "cuEventRecord");
    s.wait(0, gpu.start, "waiting for the warm-up");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < opts.iters; ++i) run();
    check_cuda(s.cu(), s.cu().event_record(gpu.stop, gpu.stream), "cuEventRecord");
    s.wait(0, gpu.stop, "waiting for the all_reduce");
    const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    float first = 0;
    check_cuda(s.cu(), s.cu().memcpy_dtoh(&first, recv.ptr(), sizeof first), "cuMemcpyDtoH");
    nc.comm_destroy(comm);
    if (first != static_cast<float>(kRanks * (kRanks + 1) / 2))
      return probe_error("gpu", "the all_reduce's result is " + std::to_string(first) + ", expected 3");
    return {{"bytes", bytes * static_cast<unsigned long long>(opts.iters)}, {"usec", usec < 1 ? 1 : usec},
            {"gpu", gpu.name}};
  } catch (const GpuCallError& e) {
    return probe_error("gpu", e.message);
  }
}

}  // namespace gpudiag::probe
