#pragma once
// What every check gets: where to read the kernel from, and the site's expectations.
#include "nodeinfo/config.h"
#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

struct CheckContext {
  const RootedFs& fs;
  const Config& cfg;
  // Locality (NUMA, shared PCIe switches) costs an hwloc topology load; only the
  // verbose and JSON reports show it.
  bool want_topology = false;
};

}  // namespace gpudiag
