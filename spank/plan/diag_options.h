#pragma once
// The --diag list (srun --diag=ITEMS, or GPUDIAG_DIAG): comma-separated items.
//
//   nccl=LEVEL      NCCL_DEBUG level: VERSION, WARN, INFO, ABORT or TRACE (default INFO)
//   subsys=A+B      NCCL_DEBUG_SUBSYS, '+'-separated since ',' separates items
//                   (default INIT+NET+ENV; '^' negates as in NCCL)
//   dir=PATH        where per-host logs go (default $SLURM_SUBMIT_DIR/gpudiag-<job>.<step>)
//   noprefix        no [host:rank] output prefix
//   prefix          force the prefix on, even for one task
//   hang=DURATION   the hang watchdog: no output from any task of a node for this long
//                   (90s, 10m, 1h; 0 turns a site default off)
//   hang-action=kill|report   end the step (default) or only write the report
//   preflight, nopreflight    check the node before the program starts
//   fabric          test what lies between the step's nodes first (fabric/; turns the
//                   preflight barrier on)
//
// Parsing is pure and strict: an unknown item or a bad value is an error that lists
// what is known, so srun can fail before anything launches.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

struct DiagOptions {
  bool enabled = false;
  std::string nccl_level = "INFO";
  std::string nccl_subsys = "INIT,NET,ENV";  // as NCCL wants it, comma-separated
  std::string dir;                           // empty: the default
  std::optional<bool> prefix;                // nullopt: the site default
  std::optional<double> hang_s;              // nullopt: the site default; 0: off
  std::optional<std::string> hang_action;    // "kill" or "report"
  std::optional<bool> preflight;
  bool fabric = false;
};

// slurmstepd reads GPUDIAG_DIAG through an 8 KiB spank_getenv buffer: srun refuses a
// longer list, so that it never fails only on the nodes (issue 21.3).
constexpr std::size_t kMaxDiagListBytes = 8191;

// `list` is what follows "--diag=" (empty for a bare --diag). Parsing into `base` lets
// GPUDIAG_DIAG and --diag combine, the option winning item by item.
Result<DiagOptions> parse_diag_list(std::string_view list, DiagOptions base = {});

// The items as the help shows them ("nccl=LEVEL, subsys=A+B, ..."), and srun's help
// line for --diag, both from the parser's own table.
std::string diag_items_list();
std::string diag_option_help();

}  // namespace gpudiag
