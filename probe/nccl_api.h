#pragma once
// libnccl.so.2 loaded at run time. The types, constants and entry points are declared
// here (no toolkit needed to build); tests/compat/check_probe_decls.cpp checks them
// against nccl.h where it is installed.
#include <cstddef>
#include <string>

#include "probe/cuda_api.h"
#include "util/lib_loader.h"

namespace gpudiag::probe {

enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};
enum ncclDataType_t : int { ncclFloat = 7 };
enum ncclRedOp_t : int { ncclSum = 0 };
struct ncclComm;
using ncclComm_t = ncclComm*;
struct ncclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};

namespace nccl {
using GetVersion = ncclResult_t (*)(int*);
using GetErrorString = const char* (*)(ncclResult_t);
using GetLastError = const char* (*)(ncclComm_t);
using CommInitAll = ncclResult_t (*)(ncclComm_t*, int, const int*);
using CommDestroy = ncclResult_t (*)(ncclComm_t);
using CommAbort = ncclResult_t (*)(ncclComm_t);
using AllReduce = ncclResult_t (*)(const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
using GroupStart = ncclResult_t (*)();
using GroupEnd = ncclResult_t (*)();
using GetUniqueId = ncclResult_t (*)(ncclUniqueId*);
using CommInitRank = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int);
}  // namespace nccl

struct Nccl {
  Library lib;
  std::string missing;
  nccl::GetVersion get_version = nullptr;
  nccl::GetErrorString error_string = nullptr;
  nccl::GetLastError last_error = nullptr;  // optional: NCCL 2.13 and later
  nccl::CommInitAll comm_init_all = nullptr;
  nccl::CommDestroy comm_destroy = nullptr;
  nccl::CommAbort comm_abort = nullptr;
  nccl::AllReduce all_reduce = nullptr;
  nccl::GroupStart group_start = nullptr;
  nccl::GroupEnd group_end = nullptr;
  // Across processes (the fabric test's pairs); optional for the one-process all_reduce.
  nccl::GetUniqueId get_unique_id = nullptr;
  nccl::CommInitRank comm_init_rank = nullptr;
};

Nccl load_nccl(const std::string& configured);
// 22809 -> "2.28.9" (codes before 2.9 used major*1000 + minor*100 + patch).
std::string nccl_version_text(int code);
void check_nccl(const Nccl& nc, ncclResult_t r, const char* what);
// NCCL's own account of its last failure ("" when it has none or cannot say).
std::string nccl_last_error(const Nccl& nc, ncclComm_t comm);

}  // namespace gpudiag::probe
