#pragma once
// What the fake NVIDIA libraries share: the simulated node, read from the environment
// of the process that loads them (gpudiag-gpu-probe, started by gpudiag-health).
//
//   FAKE_GPUS=8               GPUs NVML sees (default 8)
//   FAKE_CUDA_GPUS=7          GPUs CUDA sees (default FAKE_GPUS): the first ones in CUDA order
//   FAKE_CUDA_ORDER=reverse   CUDA ordinal i is NVML index n-1-i (or a list: "2,0,1")
//   FAKE_NVLINKS=18           NVML_FI_DEV_NVLINK_LINK_COUNT (default 0: no NVLink)
//   FAKE_NVLINK_DOWN=3:5,...  GPU 3's link 5 is inactive
//   FAKE_NVLINK_UNSUPPORTED=2 link 2 answers NOT_SUPPORTED on every GPU
//   FAKE_NVLINK_NOCAP=6,7     links 6 and 7 are unwired: no P2P capability, inactive
//   FAKE_P2P_STATUS=0         nvmlDeviceGetP2PStatus's answer for every pair
//   FAKE_ECC=2:5              GPU 2 has 5 volatile uncorrected ECC errors
//   FAKE_REMAPPED=1:pending   GPU 1 has a row remapping pending (or N:failure)
//   FAKE_MIG=1                every GPU is in MIG mode
//   FAKE_FABRIC=1:0           nvmlDeviceGetGpuFabricInfo: state 1 (NOT_STARTED), status 0
//   FAKE_THROTTLE=2:0x8       GPU 2's clocks event reasons bitmask (default 0x1, idle)
//   FAKE_TEMP=3:88            GPU 3 is at 88 C (default 34)
//   FAKE_SLOWDOWN_TEMP=3:90   GPU 3's slowdown threshold (default 87)
//   FAKE_REPLAY=1:500         GPU 1's PCIe replay counter (default 0)
//   FAKE_SLOW_PAIR=1,2        peer copies between NVML GPUs 1 and 2 run at 5 GB/s
//   FAKE_FAIL=call=code,...   the named call returns code; call@N: only for device N
//   FAKE_HANG=call,...        the named call never returns; "kernel": kernels never finish
//                             (events stay NOT_READY, cuMemFree and ncclCommDestroy block)
//   FAKE_NCCL_LAST_ERROR=...  what ncclGetLastError says
//   NCCL_DEBUG=INFO           like NCCL: log lines on stdout
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace fake {

inline std::string env(const char* name, const char* dflt = "") {
  const char* v = std::getenv(name);
  return v ? v : dflt;
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (!s.empty() && start <= s.size()) {
    std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

inline int nvml_count() { return std::atoi(env("FAKE_GPUS", "8").c_str()); }
inline int cuda_count() {
  std::string c = env("FAKE_CUDA_GPUS");
  return c.empty() ? nvml_count() : std::atoi(c.c_str());
}
// NVML index of CUDA ordinal i.
inline int nvml_of_cuda(int i) {
  std::string o = env("FAKE_CUDA_ORDER");
  if (o == "reverse") return nvml_count() - 1 - i;
  auto list = split(o, ',');
  if (i < static_cast<int>(list.size())) return std::atoi(list[i].c_str());
  return i;
}
inline bool in_list(const char* var, const std::string& item) {
  for (const auto& e : split(env(var), ','))
    if (e == item) return true;
  return false;
}
// FAKE_FAIL's code for `call` on `dev` (-1: any device), or 0.
inline int failure(const char* call, int dev = -1) {
  for (const auto& e : split(env("FAKE_FAIL"), ',')) {
    auto eq = e.find('=');
    if (eq == std::string::npos) continue;
    std::string name = e.substr(0, eq);
    auto at = name.find('@');
    if (at != std::string::npos) {
      if (name.substr(0, at) != call || std::atoi(name.substr(at + 1).c_str()) != dev) continue;
    } else if (name != call) {
      continue;
    }
    return std::atoi(e.substr(eq + 1).c_str());
  }
  return 0;
}
inline void maybe_hang(const char* call) {
  if (!in_list("FAKE_HANG", call)) return;
  for (;;) ::pause();
}
inline bool kernels_stuck() { return in_list("FAKE_HANG", "kernel"); }
inline void block_if_kernels_stuck() {
  if (kernels_stuck())
    for (;;) ::pause();
}
inline unsigned bus_of(int nvml_index) { return 0x19 + 0x10 * static_cast<unsigned>(nvml_index); }
inline void uuid_of(int nvml_index, unsigned char out[16]) {
  for (int k = 0; k < 16; ++k) out[k] = static_cast<unsigned char>(0xa0 + k);
  out[15] = static_cast<unsigned char>(nvml_index);
}

// Device memory is host memory; a stream carries a virtual clock in microseconds,
// advanced by each operation at a simulated speed, which events read.
struct Stream {
  int dev;
  double clock_us;
};
struct Event {
  double at_us;
  bool recorded;
};
inline void advance(void* stream, double bytes, double gbps) {
  if (stream) static_cast<Stream*>(stream)->clock_us += bytes / (gbps * 1e3);
}

}  // namespace fake
