// A fake libnvidia-ml.so.1: the entry points gpudiag-gpu-probe resolves, for the node
// described in fake_driver.h.
#include <cstdio>

#include "fake_driver.h"

namespace {

struct Dev {
  int index;
};
Dev devs[64];

int fail_or(const char* call, int dev, int ok = 0) {
  fake::maybe_hang(call);
  int f = fake::failure(call, dev);
  if (!f) f = fake::failure(call);
  return f ? f : ok;
}
int idx(void* h) { return static_cast<Dev*>(h)->index; }
bool valid(void* h) { return h && idx(h) >= 0 && idx(h) < fake::nvml_count(); }
bool link_listed(const char* var, int gpu, unsigned link) {
  return fake::in_list(var, std::to_string(gpu) + ":" + std::to_string(link));
}

// VAR=gpu:value,... (value in C's notation: 0x8 or 136); dflt for GPUs not listed.
unsigned long long per_gpu(const char* var, int gpu, unsigned long long dflt) {
  for (const auto& e : fake::split(fake::env(var), ','))
    if (auto c = e.find(':'); c != std::string::npos && std::atoi(e.substr(0, c).c_str()) == gpu)
      return std::strtoull(e.substr(c + 1).c_str(), nullptr, 0);
  return dflt;
}

struct FieldValue {
  unsigned fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType, nvmlReturn;
  unsigned long long value;
};
struct FabricInfo {
  char clusterUuid[16];
  int status;
  unsigned cliqueId;
  unsigned char state;
};

}  // namespace

extern "C" {

int nvmlInit_v2() { return fail_or("nvmlInit", -1); }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) {
  switch (r) {
    case 0: return "Success";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* buf, unsigned len) {
  std::snprintf(buf, len, "%s", "570.86.15");
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = static_cast<unsigned>(fake::nvml_count());
  return fail_or("nvmlDeviceGetCount", -1);
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) {
  if (static_cast<int>(i) >= fake::nvml_count()) return 2;
  if (int f = fail_or("nvmlDeviceGetHandleByIndex", static_cast<int>(i))) return f;
  devs[i].index = static_cast<int>(i);
  *h = &devs[i];
  return 0;
}
int nvmlDeviceGetName(void* h, char* buf, unsigned len) {
  if (!valid(h)) return 2;
  std::snprintf(buf, len, "%s", fake::env("FAKE_GPU_NAME", "NVIDIA H100 80GB HBM3").c_str());
  return 0;
}
int nvmlDeviceGetUUID(void* h, char* buf, unsigned len) {
  if (!valid(h)) return 2;
  unsigned char u[16];
  fake::uuid_of(idx(h), u);
  std::snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* h, char* info) {
  if (!valid(h)) return 2;
  if (int f = fail_or("nvmlDeviceGetPciInfo", idx(h))) return f;
  // busIdLegacy[16], 5 unsigned, busId[32]
  std::memset(info, 0, 16 + 5 * 4 + 32);
  std::snprintf(info + 16 + 20, 32, "00000000:%02X:00.0", fake::bus_of(idx(h)));
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* h, int, int, unsigned long long* count) {
  if (!valid(h)) return 2;
  *count = 0;
  for (const auto& e : fake::split(fake::env("FAKE_ECC"), ','))
    if (auto c = e.find(':'); c != std::string::npos && std::atoi(e.substr(0, c).c_str()) == idx(h))
      *count = std::strtoull(e.substr(c + 1).c_str(), nullptr, 10);
  return fail_or("nvmlDeviceGetTotalEccErrors", idx(h));
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* h, int* pending) {
  *pending = 0;
  return valid(h) ? 0 : 2;
}
int nvmlDeviceGetRemappedRows(void* h, unsigned* corr, unsigned* unc, unsigned* pend, unsigned* fail) {
  if (!valid(h)) return 2;
  *corr = *unc = *pend = *fail = 0;
  const std::string me = std::to_string(idx(h));
  *pend = fake::in_list("FAKE_REMAPPED", me + ":pending");
  *fail = fake::in_list("FAKE_REMAPPED", me + ":failure");
  *unc = *pend + *fail;
  return 0;
}
int nvmlDeviceGetFieldValues(void* h, int n, FieldValue* values) {
  if (!valid(h)) return 2;
  if (int f = fail_or("nvmlDeviceGetFieldValues", idx(h))) return f;
  for (int i = 0; i < n; ++i) {
    values[i].nvmlReturn = 3;
    if (values[i].fieldId == 91) {  // NVML_FI_DEV_NVLINK_LINK_COUNT
      values[i].nvmlReturn = 0;
      values[i].valueType = 1;
      values[i].value = 0;
      unsigned links = static_cast<unsigned>(std::atoi(fake::env("FAKE_NVLINKS", "0").c_str()));
      std::memcpy(&values[i].value, &links, sizeof links);
    }
  }
  return 0;
}
int nvmlDeviceGetNvLinkState(void* h, unsigned link, int* active) {
  if (!valid(h)) return 2;
  unsigned links = static_cast<unsigned>(std::atoi(fake::env("FAKE_NVLINKS", "0").c_str()));
  if (links == 0) return 3;
  if (link >= 18) return 2;
  if (link >= links || fake::in_list("FAKE_NVLINK_UNSUPPORTED", std::to_string(link))) return 3;
  *active = !(fake::in_list("FAKE_NVLINK_NOCAP", std::to_string(link)) || link_listed("FAKE_NVLINK_DOWN", idx(h), link));
  return 0;
}
int nvmlDeviceGetNvLinkCapability(void* h, unsigned link, int cap, unsigned* result) {
  if (!valid(h)) return 2;
  unsigned links = static_cast<unsigned>(std::atoi(fake::env("FAKE_NVLINKS", "0").c_str()));
  if (link >= links || fake::in_list("FAKE_NVLINK_UNSUPPORTED", std::to_string(link))) return 3;
  *result = cap == 0 ? !fake::in_list("FAKE_NVLINK_NOCAP", std::to_string(link)) : 1;
  return 0;
}
int nvmlDeviceGetP2PStatus(void* a, void* b, int, int* status) {
  if (!valid(a) || !valid(b)) return 2;
  if (int f = fail_or("nvmlDeviceGetP2PStatus", idx(a))) return f;
  *status = fake::env("FAKE_MIG") == "1" ? 5 : std::atoi(fake::env("FAKE_P2P_STATUS", "0").c_str());
  return 0;
}
int nvmlDeviceGetMigMode(void* h, unsigned* current, unsigned* pending) {
  if (!valid(h)) return 2;
  *current = *pending = fake::env("FAKE_MIG") == "1";
  return 0;
}
int nvmlDeviceGetGpuFabricInfo(void* h, FabricInfo* info) {
  if (!valid(h)) return 2;
  std::string f = fake::env("FAKE_FABRIC");
  if (f.empty()) return 3;
  std::memset(info, 0, sizeof *info);
  auto parts = fake::split(f, ':');
  info->state = static_cast<unsigned char>(std::atoi(parts[0].c_str()));
  info->status = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
  return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void* h, unsigned long long* reasons) {
  if (!valid(h)) return 2;
  if (int f = fail_or("nvmlDeviceGetCurrentClocksEventReasons", idx(h))) return f;
  *reasons = per_gpu("FAKE_THROTTLE", idx(h), 0x1);  // idle, like a GPU between jobs
  return 0;
}
int nvmlDeviceGetTemperature(void* h, int sensor, unsigned* temp) {
  if (!valid(h) || sensor != 0) return 2;  // NVML_TEMPERATURE_GPU is the only sensor
  if (int f = fail_or("nvmlDeviceGetTemperature", idx(h))) return f;
  *temp = static_cast<unsigned>(per_gpu("FAKE_TEMP", idx(h), 34));
  return 0;
}
int nvmlDeviceGetTemperatureThreshold(void* h, int type, unsigned* temp) {
  if (!valid(h)) return 2;
  if (int f = fail_or("nvmlDeviceGetTemperatureThreshold", idx(h))) return f;
  if (type != 1) return 3;  // only NVML_TEMPERATURE_THRESHOLD_SLOWDOWN is simulated
  *temp = static_cast<unsigned>(per_gpu("FAKE_SLOWDOWN_TEMP", idx(h), 87));  // an H100 SXM's
  return 0;
}
int nvmlDeviceGetPcieReplayCounter(void* h, unsigned* value) {
  if (!valid(h)) return 2;
  if (int f = fail_or("nvmlDeviceGetPcieReplayCounter", idx(h))) return f;
  *value = static_cast<unsigned>(per_gpu("FAKE_REPLAY", idx(h), 0));
  return 0;
}

}  // extern "C"
