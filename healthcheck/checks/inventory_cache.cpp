#include "healthcheck/checks/inventory_cache.h"

#include "healthcheck/checks/check_context.h"

namespace gpudiag {

const PciInventory& pci_inventory(const CheckContext& ctx) {
  if (!ctx.inventory->pci) ctx.inventory->pci = discover_pci(ctx.fs);
  return *ctx.inventory->pci;
}

const IbInventory& ib_inventory(const CheckContext& ctx) {
  if (!ctx.inventory->ib) ctx.inventory->ib = discover_ib(ctx.fs);
  return *ctx.inventory->ib;
}

}  // namespace gpudiag
