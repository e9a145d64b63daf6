#pragma once
// libnccl.so.2 loaded at run time. Types and signatures come from the toolkit's nccl.h.
#include <nccl.h>

#include <string>

#include "probe/lib_loader.h"

namespace gpudiag::probe {

struct Nccl {
  Library lib;
  std::string missing;
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
};

Nccl load_nccl(const std::string& configured);
// 22809 -> "2.28.9" (codes before 2.9 used major*1000 + minor*100 + patch).
std::string nccl_version_text(int code);
void check_nccl(const Nccl& nc, ncclResult_t r, const char* what);

}  // namespace gpudiag::probe
