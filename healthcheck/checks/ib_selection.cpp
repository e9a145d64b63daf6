#include "healthcheck/checks/ib_selection.h"

#include "util/name_patterns.h"

namespace gpudiag {

bool ib_hca_selected(const IbExpect& expect, const std::string& hca) {
  if (matches_any(expect.exclude, hca)) return false;
  return expect.hcas.empty() || matches_any(expect.hcas, hca);
}

}  // namespace gpudiag
