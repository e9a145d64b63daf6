#pragma once
// Which HCAs the IB checks look at: not excluded by ib.exclude, and among ib.hcas
// when that is given. One rule for every check that walks the HCAs.
#include <string>

#include "config/config.h"

namespace gpudiag {

bool ib_hca_selected(const IbExpect& expect, const std::string& hca);

}  // namespace gpudiag
