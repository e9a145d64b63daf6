#pragma once
// The gdr check: can NCCL move data between GPUs and RDMA NICs directly (GPUDirect
// RDMA)? Without it NCCL silently stages every inter-node transfer through host memory
// ("GPU Direct RDMA Disabled for HCA ... (no module)" at INFO level only), at a
// fraction of the bandwidth.
#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"
#include "nodeinfo/gpudirect_facts.h"

namespace gpudiag {

// Pure: the findings for facts read elsewhere.
CheckResult evaluate_gdr(const GpuDirectFacts& facts, const GdrSettings& cfg);
CheckResult run_gdr_check(const CheckContext& ctx);

}  // namespace gpudiag
