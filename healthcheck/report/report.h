#pragma once
// What a health run produces: findings grouped by check, with Nagios-style statuses
// (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) that double as the exit code.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace gpudiag {

enum class Status { ok = 0, warning = 1, critical = 2, unknown = 3 };

const char* status_name(Status s);   // "ok"
const char* status_label(Status s);  // "OK"
// Which of two statuses wins when combined: CRITICAL > UNKNOWN > WARNING > OK. A node
// that is broken is reported as broken even if another check could not run; a check
// that could not run is never hidden behind a mere warning.
Status worse(Status a, Status b);
// What a finding governed by a config policy becomes.
Status policy_status(Policy p);

struct Finding {
  std::string subject;  // the thing: mlx5_3:1, 0000:3a:00.0, GPU2-GPU5, iommu
  Status status = Status::ok;
  std::string message;  // one line, names the subject and what is wrong
  std::string hint;     // what to do about it; may be empty
};

// One per-device value for `--format prometheus` (port rate, PCIe width, an error
// counter, busbw): checks add them as they read; the formatter groups them by name.
// `name` is the full metric name (gpudiag_...), labels identify the device.
struct Metric {
  std::string name;
  std::string help;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

struct CheckResult {
  std::string name;
  Status status = Status::ok;
  std::string summary;
  double duration_ms = 0;
  std::vector<Finding> findings;  // OK findings describe what was seen (verbose, JSON)
  nlohmann::json details;         // structured extras for JSON, e.g. PCI locality
  std::string text;               // a preformatted block (the P2P matrix) for verbose output
  std::vector<Metric> metrics;    // per-device values for prometheus

  void add(Finding f);
  // The worst finding, or nullptr when all are OK.
  const Finding* most_severe() const;
  int count(Status s) const;
};

// What --drain/--resume did about the node in Slurm (ARCHITECTURE §4), for every
// format. The status stays what the checks found: a node held back is still CRITICAL.
struct SlurmOutcome {
  // drained, resumed, held_back (the breaker kept a CRITICAL node in service, or could
  // not count), unchanged (nothing to do, or not ours), failed (scontrol did not do it)
  std::string action;
  std::string explanation;  // one line for people
  // The breaker's figures when it held the node back on a cap (limit > 0).
  std::string cap;
  int count = 0, limit = 0;
};

struct Report {
  std::string node;
  Status status = Status::ok;
  double duration_ms = 0;
  std::vector<CheckResult> checks;
  double finished_at_s = 0;  // when the run ended, seconds since the epoch; 0: not recorded
  std::optional<SlurmOutcome> slurm;  // with --drain or --resume

  const Finding* most_severe() const;
  void add(CheckResult c);
};

// The most severe finding's message, with "(+N more)" when others are CRITICAL or
// UNKNOWN too: the one line that NHC and drain reasons show.
std::string headline(const Report& r);

}  // namespace gpudiag
