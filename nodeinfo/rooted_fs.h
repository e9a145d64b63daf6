#pragma once
// Every read of /sys and /proc goes through RootedFs, so that --fs-root can point the
// whole tool at a fixture tree (the same idea as hwloc's HWLOC_FSROOT). Under a root
// other than "/", every path resolves inside it, symlinks included: a tree cannot make
// a root-run checker read, list or print what lies outside it.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpudiag {

class RootedFs {
 public:
  // How paths under a root are resolved: openat2(RESOLVE_IN_ROOT) where the kernel has
  // it, else a walk of one component at a time; `walk` forces the walk (tests).
  enum class Resolver { automatic, walk };
  explicit RootedFs(std::string root = "/", Resolver resolver = Resolver::automatic);

  const std::string& root() const { return root_; }
  bool is_host_root() const { return root_ == "/"; }
  // Where a kernel path such as /sys/class/infiniband lives on this machine.
  std::string host_path(std::string_view kernel_path) const;

  // Reads at most max_bytes; a longer file is an error, because sysfs attributes are
  // small and a huge one means something is wrong. Only regular files are opened (the
  // type is checked first through O_PATH), so a FIFO or device node in a broken tree
  // can neither block the checker nor be opened by it.
  Result<std::string> read_file(std::string_view kernel_path, std::size_t max_bytes = 4096) const;
  // Reads up to max_bytes and returns what is there; short files are fine (PCI config
  // space is 64 bytes for non-root readers, 4096 for root).
  Result<std::string> read_prefix(std::string_view kernel_path, std::size_t max_bytes) const;
  // Entry names, sorted, without "." and "..". A missing directory is an error.
  Result<std::vector<std::string>> list_dir(std::string_view kernel_path) const;
  bool exists(std::string_view kernel_path) const;
  // True for a dangling symlink too, which exists() does not see.
  bool lexists(std::string_view kernel_path) const;
  // The kernel path this one names once symlinks are followed, each link's target read
  // inside the root (an absolute target starts at the root, ".." stops there). A
  // dangling symlink is an error.
  Result<std::string> resolve(std::string_view kernel_path) const;

 private:
  struct RootDir;
  Result<std::string> read_impl(std::string_view kernel_path, std::size_t max_bytes,
                                bool longer_is_error) const;
  int open_in_root(std::string_view kernel_path, int flags) const;
  bool is_dangling(std::string_view kernel_path) const;
  std::string root_;
  Resolver resolver_ = Resolver::automatic;
  std::shared_ptr<const RootDir> root_dir_;  // O_PATH fd of the root, shared by copies
};

}  // namespace gpudiag
