#include "healthcheck/checks/rdma_provider.h"

#include <fmt/format.h>

namespace gpudiag {

RdmaProvider rdma_provider(const IbHca& hca) {
  if (hca.driver == "mlx5_core") return RdmaProvider::mlx5;
  if (hca.driver == "efa") return RdmaProvider::efa;
  if (!hca.driver.empty()) return RdmaProvider::other;
  if (hca.name.rfind("mlx5_", 0) == 0) return RdmaProvider::mlx5;
  if (hca.name.rfind("rdmap", 0) == 0 || hca.name.rfind("efa_", 0) == 0) return RdmaProvider::efa;
  return RdmaProvider::other;
}

const char* provider_name(RdmaProvider p) {
  switch (p) {
    case RdmaProvider::mlx5: return "mlx5";
    case RdmaProvider::efa: return "efa";
    case RdmaProvider::other: return "rdma";
  }
  return "rdma";
}

std::string fix_unreadable(RdmaProvider p, const std::string& hca) {
  switch (p) {
    case RdmaProvider::mlx5:
      return "the IB driver should fill this file; check `dmesg` for mlx5 errors and reload the driver";
    case RdmaProvider::efa:
      return fmt::format("the efa driver should fill this file; check `dmesg | grep -i efa` and `ibv_devinfo -d {}`, "
                         "and reload the driver (`modprobe -r efa && modprobe efa`)",
                         hca);
    case RdmaProvider::other: break;
  }
  return fmt::format("the RDMA driver should fill this file; check `dmesg`, `rdma link show` and `ibv_devinfo -d {}`",
                     hca);
}

std::string fix_link_down(RdmaProvider p, const std::string& hca) {
  switch (p) {
    case RdmaProvider::mlx5:
      return fmt::format("the link is training or recovering from errors: check the cable and run "
                         "`mlxlink -d {}` or `ibstat {}`",
                         hca, hca);
    case RdmaProvider::efa:
      return fmt::format("the efa driver reports its device down: check `dmesg | grep -i efa` and "
                         "`ibv_devinfo -d {}`; if the device stays down, stop and start the instance",
                         hca);
    case RdmaProvider::other: break;
  }
  return fmt::format("the link is training or recovering from errors: check the cable, `rdma link show` and "
                     "`ibv_devinfo -d {}`",
                     hca);
}

std::string fix_slow(RdmaProvider p, const std::string& hca) {
  switch (p) {
    case RdmaProvider::mlx5:
      return fmt::format("the link trained at a lower speed or width: reseat or replace the cable/transceiver, "
                         "check the switch port, and look at `mlxlink -d {}`",
                         hca);
    case RdmaProvider::efa:
      return fmt::format("the efa device reports a lower link speed than expected: check `ibv_devinfo -d {}` and the "
                         "instance type; the driver reports what the device's max_link_speed says",
                         hca);
    case RdmaProvider::other: break;
  }
  return fmt::format("the link trained at a lower speed or width: reseat or replace the cable/transceiver, "
                     "check the switch port, and look at `ethtool` on its interface and `ibv_devinfo -d {}`",
                     hca);
}

std::string fix_link_layer(RdmaProvider p, const std::string& hca, int port, const std::string& want) {
  if (p == RdmaProvider::mlx5 && (want == "InfiniBand" || want == "Ethernet"))
    return fmt::format("set the port to {} with `mlxconfig -d {} set LINK_TYPE_P{}={}` and reboot", want, hca, port,
                       want == "InfiniBand" ? 1 : 2);
  return fmt::format("{}'s driver reports this link layer itself; if the port belongs to another role, say so in "
                     "ib.roles, else correct the expected link layer",
                     hca);
}

std::string fix_missing(RdmaProvider p) {
  switch (p) {
    case RdmaProvider::mlx5:
      return "check that the HCA is seated (`lspci -d 15b3:`), its firmware is healthy and mlx5_core/mlx5_ib "
             "are loaded (`dmesg | grep mlx5`)";
    case RdmaProvider::efa:
      return "check that the EFA device is attached to the instance (`lspci -d 1d0f:`, `fi_info -p efa`) and the "
             "efa driver is loaded (`dmesg | grep -i efa`); a device the instance type should have and lacks "
             "needs the instance stopped and started";
    case RdmaProvider::other: break;
  }
  return "check that the device is on PCI (`lspci`), its driver is loaded (`dmesg`) and `rdma link show` lists it";
}

}  // namespace gpudiag
