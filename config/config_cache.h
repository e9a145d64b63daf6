#pragma once
// The plugin's config cache (issue 34): the config file's document (config_tree.h) kept as
// bytes beside the file's identity, so that srun and each slurmstepd read a few hundred
// bytes instead of loading yaml-cpp and parsing the YAML on every step.
//
// The format, and when a cache may be used or written, each defined here once:
// - A cache names the file it was made from and that file's identity as fstat gave it
//   when it was read: device, inode, size, modification and change time (ns). Any write,
//   rename over, chmod or chown of the file changes its change time, so a cache is used
//   only for the very file, unchanged, and otherwise ignored (the YAML is parsed again).
// - Only a file whose change time is at least kSettled_ns old is cached: a file changed
//   again within the clock's granularity could keep every field of its identity.
// - The cache holds the document, not its meaning: today's rules read it each time, so a
//   cache made by an older gpudiag is still right; a change of this format changes the
//   magic line, and a cache of another format is ignored.
// Where it lives and who may write it (root, in a root-only dir): spank/slurm/plugin_config.*.
#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag {

struct ConfigIdentity {
  std::string path;
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const ConfigIdentity& o) const;
};
ConfigIdentity identity_of(const std::string& path, const struct stat& st);

constexpr std::int64_t kSettled_ns = 2'000'000'000;
// Whether a file of this identity may be cached at `now_ns` (CLOCK_REALTIME).
bool settled(const ConfigIdentity& id, std::int64_t now_ns);

// The cache's name in its dir for the config at `path`: one cache per config file.
std::string cache_file_name(const std::string& path);

// A cache's bytes, and the document back out of them: nullopt unless they are a cache of
// this format for exactly `id` (the tree's own form is checked by tree_from_bytes).
std::string encode_cache(const ConfigIdentity& id, std::string_view tree_bytes);
std::optional<std::string_view> cached_tree(std::string_view cache, const ConfigIdentity& id);

// A cache's bound: the tree of a config of kMaxConfigBytes, generously.
constexpr std::size_t kMaxCacheBytes = 8u << 20;

}  // namespace gpudiag
