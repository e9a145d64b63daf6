#include "probe/nccl_api.h"

namespace gpudiag::probe {

Nccl load_nccl(const std::string& configured) {
  Nccl n;
  n.lib = load_library(configured, {"libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/lib64/libnccl.so.2",
                                    "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/nccl/lib/libnccl.so.2"});
  if (!n.lib) return n;
  std::string& m = n.missing;
  resolve(n.lib, n.get_version, {"ncclGetVersion"}, m);
  resolve(n.lib, n.error_string, {"ncclGetErrorString"}, m);
  resolve(n.lib, n.comm_init_all, {"ncclCommInitAll"}, m);
  resolve(n.lib, n.comm_destroy, {"ncclCommDestroy"}, m);
  resolve(n.lib, n.comm_abort, {"ncclCommAbort"}, m);
  resolve(n.lib, n.all_reduce, {"ncclAllReduce"}, m);
  resolve(n.lib, n.group_start, {"ncclGroupStart"}, m);
  resolve(n.lib, n.group_end, {"ncclGroupEnd"}, m);
  std::string optional;
  resolve(n.lib, n.last_error, {"ncclGetLastError"}, optional);
  resolve(n.lib, n.get_unique_id, {"ncclGetUniqueId"}, optional);
  resolve(n.lib, n.comm_init_rank, {"ncclCommInitRank"}, optional);
  return n;
}

std::string nccl_version_text(int code) {
  int major, minor, patch;
  if (code >= 10000) {
    major = code / 10000;
    minor = code / 100 % 100;
    patch = code % 100;
  } else {
    major = code / 1000;
    minor = code / 100 % 10;
    patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

void check_nccl(const Nccl& nc, ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  poison_gpu();
  const char* s = nc.error_string ? nc.error_string(r) : nullptr;
  throw GpuCallError{std::string(what) + " failed: " + (s ? s : "NCCL error") + " (" + std::to_string(r) + ")"};
}

std::string nccl_last_error(const Nccl& nc, ncclComm_t comm) {
  const char* s = nc.last_error ? nc.last_error(comm) : nullptr;
  return s ? s : "";
}

}  // namespace gpudiag::probe
