#include "healthcheck/checks/pci_locality.h"

#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace gpudiag {
namespace {

std::string bdf_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  return buf;
}

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};

}  // namespace

PciLocality load_pci_locality(const std::string& fs_root) {
  PciLocality out;
  // Load none of hwloc's plugins: sysfs (the built-in linux component) has all we
  // need, and the OpenCL/GL/CUDA/NVML ones pull GPU libraries into this process,
  // where a wedged GPU can hang their init forever. GPU work belongs in the probe.
  ::setenv("HWLOC_PLUGINS_BLACKLIST",
           "hwloc_opencl,hwloc_gl,hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero,hwloc_pci,hwloc_xml_libxml", 0);
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    out.error = "hwloc_topology_init failed";
    return out;
  }
  std::unique_ptr<hwloc_topology, TopologyDeleter> topo(raw);
  // Belt and braces for a site that sets HWLOC_PLUGINS_BLACKLIST itself.
  for (const char* c : {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"})
    hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
  if (fs_root != "/") {
    // cpuid describes the machine we run on, not the tree under fs_root.
    hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    ::setenv("HWLOC_FSROOT", fs_root.c_str(), 1);
  }
  hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_cache_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo.get()) != 0) {
    out.error = "hwloc could not load the topology";
    return out;
  }

  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo.get(), nullptr); o; o = hwloc_get_next_pcidev(topo.get(), o)) {
    PciPlace place;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo.get(), o);
    if (anc && anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1) place.numa = hwloc_bitmap_first(anc->nodeset);
    // Bridges from the device up: [downstream port, upstream port, ..., root port].
    std::vector<hwloc_obj_t> bridges;
    for (hwloc_obj_t p = o->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
      if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) bridges.push_back(p);
    if (bridges.size() >= 3) place.switch_bdf = bdf_of(bridges[bridges.size() - 2]->attr->bridge.upstream.pci);
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) place.os_devices.emplace_back(c->name);
    out.by_bdf.emplace(bdf_of(o->attr->pcidev), std::move(place));
  }
  return out;
}

}  // namespace gpudiag
