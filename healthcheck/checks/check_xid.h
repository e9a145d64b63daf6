#pragma once
// The xid check: the NVIDIA driver's Xid events in the kernel log since the last run
// (or since boot on a first run), each classified by the Xid catalogue.
#include <nlohmann/json.hpp>

#include <string>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"
#include "nodeinfo/kmsg.h"

namespace gpudiag {

struct XidFacts {
  KmsgRead kmsg;
  std::string boot_id;     // empty when unreadable
  std::string state_note;  // why the previous run's state is missing, if it is
  std::string state_path;  // where it is kept, for the hint on clearing a held Xid
};

struct XidOutcome {
  CheckResult result;
  nlohmann::json state;  // to store for the next run; null: keep the previous
};

// Pure. `previous`: what the last run stored ({"boot_id", "last_seq", "held"}), null
// if none. Xids that make the check CRITICAL are held (reported again by every run)
// until the boot id changes.
XidOutcome evaluate_xid(const XidFacts& facts, const nlohmann::json& previous, const XidSettings& cfg);
XidFacts read_xid_facts(const CheckContext& ctx);
CheckResult run_xid_check(const CheckContext& ctx);

}  // namespace gpudiag
