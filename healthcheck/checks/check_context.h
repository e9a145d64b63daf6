#pragma once
// What every check gets: where to read the kernel from, and the site's expectations.
#include <chrono>
#include <memory>

#include "healthcheck/checks/inventory_cache.h"

#include "config/config.h"
#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

class RunState;

struct CheckContext {
  const RootedFs& fs;
  const Config& cfg;
  // Locality (NUMA, shared PCIe switches) costs an hwloc topology load; only the
  // verbose and JSON reports show it.
  bool want_topology = false;
  // When the whole run's budget ends: a check that starts a helper (the GPU probe)
  // gives it no more than what is left, so the helper's timeout is the one reported.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // What the checks that compare with the last run (xid, ibcounters) read and store;
  // null: nothing is kept, every run is a first run.
  RunState* state = nullptr;
  // What several checks read (inventory_cache.h); copies of a context share it.
  std::shared_ptr<InventoryCache> inventory = std::make_shared<InventoryCache>();
};

}  // namespace gpudiag
