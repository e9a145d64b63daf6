#include "healthcheck/report/report.h"

namespace gpudiag {
namespace {

int rank(Status s) {
  switch (s) {
    case Status::ok: return 0;
    case Status::warning: return 1;
    case Status::unknown: return 2;
    case Status::critical: return 3;
  }
  return 0;
}

}  // namespace

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::warning: return "warning";
    case Status::critical: return "critical";
    case Status::unknown: return "unknown";
  }
  return "unknown";
}

const char* status_label(Status s) {
  switch (s) {
    case Status::ok: return "OK";
    case Status::warning: return "WARNING";
    case Status::critical: return "CRITICAL";
    case Status::unknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

Status worse(Status a, Status b) { return rank(a) >= rank(b) ? a : b; }

Status policy_status(Policy p) {
  switch (p) {
    case Policy::critical: return Status::critical;
    case Policy::warning: return Status::warning;
    case Policy::ignore: return Status::ok;
  }
  return Status::critical;
}

void CheckResult::add(Finding f) {
  status = worse(status, f.status);
  findings.push_back(std::move(f));
}

const Finding* CheckResult::most_severe() const {
  const Finding* best = nullptr;
  for (const auto& f : findings) {
    if (f.status == Status::ok) continue;
    if (!best || (worse(f.status, best->status) == f.status && f.status != best->status)) best = &f;
  }
  return best;
}

int CheckResult::count(Status s) const {
  int n = 0;
  for (const auto& f : findings) n += f.status == s;
  return n;
}

const Finding* Report::most_severe() const {
  const Finding* best = nullptr;
  for (const auto& c : checks) {
    const Finding* f = c.most_severe();
    if (f && (!best || (worse(f->status, best->status) == f->status && f->status != best->status))) best = f;
  }
  return best;
}

std::string headline(const Report& r) {
  const Finding* worst = r.most_severe();
  if (!worst) return std::string("node is ") + status_name(r.status);
  int others = -1;
  for (const auto& c : r.checks)
    for (const auto& f : c.findings) others += f.status == Status::critical || f.status == Status::unknown;
  std::string line = worst->message;
  if (others > 0) line += " (+" + std::to_string(others) + " more)";
  return line;
}

void Report::add(CheckResult c) {
  status = worse(status, c.status);
  checks.push_back(std::move(c));
}

}  // namespace gpudiag
