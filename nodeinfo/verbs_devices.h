#pragma once
// RDMA devices as libibverbs (and so NCCL) sees them. sysfs lists an HCA as soon as
// the kernel driver binds; user space can only open it once ib_uverbs has created its
// character device. Only the live system can answer: libibverbs asks the kernel over
// netlink, so it cannot be pointed at an --fs-root tree.
#include <optional>
#include <string>
#include <vector>

namespace gpudiag {

// Names from ibv_get_device_list, or nullopt when libibverbs could not list devices.
std::optional<std::vector<std::string>> verbs_device_names();

}  // namespace gpudiag
