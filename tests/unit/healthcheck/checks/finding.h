#pragma once
// The finding about `subject` in a check's result (nullptr: none), for the checks' tests.
#include <string>

#include "healthcheck/checks/check_runner.h"

namespace gpudiag::test {

inline const Finding* find(const CheckResult& r, const std::string& subject) {
  for (const auto& f : r.findings)
    if (f.subject == subject) return &f;
  return nullptr;
}

}  // namespace gpudiag::test
