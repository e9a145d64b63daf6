#include "config/config_cache.h"

#include <cstdio>

namespace gpudiag {
namespace {

constexpr std::string_view kMagic = "gpudiag config cache 1\n";

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool take_u64(std::string_view& in, std::uint64_t& v) {
  if (in.size() < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(8);
  return true;
}

std::int64_t ns(const struct timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

bool ConfigIdentity::operator==(const ConfigIdentity& o) const {
  return path == o.path && dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
         ctime_ns == o.ctime_ns;
}

ConfigIdentity identity_of(const std::string& path, const struct stat& st) {
  ConfigIdentity id;
  id.path = path;
  id.dev = static_cast<std::uint64_t>(st.st_dev);
  id.ino = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = ns(st.st_mtim);
  id.ctime_ns = ns(st.st_ctim);
  return id;
}

bool settled(const ConfigIdentity& id, std::int64_t now_ns) {
  return now_ns - id.ctime_ns >= kSettled_ns && now_ns - id.mtime_ns >= kSettled_ns;
}

std::string cache_file_name(const std::string& path) {
  // FNV-1a: a name per path, not a secret (the dir is root's alone).
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : path) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char name[40];
  std::snprintf(name, sizeof name, "config-%016llx.cache", static_cast<unsigned long long>(h));
  return name;
}

std::string encode_cache(const ConfigIdentity& id, std::string_view tree_bytes) {
  std::string out(kMagic);
  put_u64(out, id.path.size());
  out += id.path;
  for (std::uint64_t v : {id.dev, id.ino, id.size, static_cast<std::uint64_t>(id.mtime_ns),
                          static_cast<std::uint64_t>(id.ctime_ns), static_cast<std::uint64_t>(tree_bytes.size())})
    put_u64(out, v);
  out += tree_bytes;
  return out;
}

std::optional<std::string_view> cached_tree(std::string_view cache, const ConfigIdentity& want) {
  if (cache.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  cache.remove_prefix(kMagic.size());
  std::uint64_t len = 0;
  if (!take_u64(cache, len) || len != want.path.size() || cache.substr(0, len) != want.path) return std::nullopt;
  cache.remove_prefix(len);
  ConfigIdentity got;
  got.path = want.path;
  std::uint64_t mtime = 0, ctime = 0, tree = 0;
  if (!take_u64(cache, got.dev) || !take_u64(cache, got.ino) || !take_u64(cache, got.size) || !take_u64(cache, mtime) ||
      !take_u64(cache, ctime) || !take_u64(cache, tree))
    return std::nullopt;
  got.mtime_ns = static_cast<std::int64_t>(mtime);
  got.ctime_ns = static_cast<std::int64_t>(ctime);
  if (!(got == want) || tree != cache.size()) return std::nullopt;
  return cache;
}

}  // namespace gpudiag
