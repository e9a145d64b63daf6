#pragma once
// The --diag list (srun --diag=ITEMS, or GPUDIAG_DIAG): comma-separated items.
//
//   nccl=LEVEL      NCCL_DEBUG level: VERSION, WARN, INFO, ABORT or TRACE (default INFO)
//   subsys=A+B      NCCL_DEBUG_SUBSYS, '+'-separated since ',' separates items
//                   (default INIT+NET+ENV; '^' negates as in NCCL)
//   dir=PATH        where per-host logs go (default $SLURM_SUBMIT_DIR/gpudiag-<job>.<step>)
//   noprefix        no [host:rank] output prefix
//   prefix          force the prefix on, even for one task
//   hang=DURATION, hang-action=..., preflight   reserved for the hang watchdog and the
//                   node preflight; rejected until they exist
//
// Parsing is pure and strict: an unknown item or a bad value is an error that lists
// what is known, so srun can fail before anything launches.
#include <optional>
#include <string>
#include <string_view>

#include "nodeinfo/result.h"

namespace gpudiag {

struct DiagOptions {
  bool enabled = false;
  std::string nccl_level = "INFO";
  std::string nccl_subsys = "INIT,NET,ENV";  // as NCCL wants it, comma-separated
  std::string dir;                           // empty: the default
  std::optional<bool> prefix;                // nullopt: the site default
};

// `list` is what follows "--diag=" (empty for a bare --diag). Parsing into `base` lets
// GPUDIAG_DIAG and --diag combine, the option winning item by item.
Result<DiagOptions> parse_diag_list(std::string_view list, DiagOptions base = {});

}  // namespace gpudiag
