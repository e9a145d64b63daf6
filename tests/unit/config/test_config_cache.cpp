#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>

#include "config/config_cache.h"

using namespace gpudiag;

namespace {

ConfigIdentity some_id() {
  struct stat st {};
  st.st_dev = 2049;
  st.st_ino = 123456;
  st.st_size = 2345;
  st.st_mtim = {1700000000, 5};
  st.st_ctim = {1700000001, 7};
  return identity_of("/etc/gpudiag/gpudiag.yaml", st);
}

}  // namespace

TEST(ConfigCache, GivesBackTheTreeForExactlyItsFile) {
  const ConfigIdentity id = some_id();
  const std::string cache = encode_cache(id, "TREE");
  auto tree = cached_tree(cache, id);
  ASSERT_TRUE(tree);
  EXPECT_EQ(*tree, "TREE");
}

// Any change of the file's identity makes the cache someone else's: parsed again.
TEST(ConfigCache, AnyOtherIdentityIsAMiss) {
  const ConfigIdentity id = some_id();
  const std::string cache = encode_cache(id, "TREE");
  auto changed = [&](auto edit) {
    ConfigIdentity other = id;
    edit(other);
    return cached_tree(cache, other).has_value();
  };
  EXPECT_FALSE(changed([](ConfigIdentity& o) { o.path = "/etc/gpudiag/other.yaml"; }));
  EXPECT_FALSE(changed([](ConfigIdentity& o) { o.dev += 1; }));
  EXPECT_FALSE(changed([](ConfigIdentity& o) { o.ino += 1; }));
  EXPECT_FALSE(changed([](ConfigIdentity& o) { o.size += 1; }));
  EXPECT_FALSE(changed([](ConfigIdentity& o) { o.mtime_ns += 1; }));
  EXPECT_FALSE(changed([](ConfigIdentity& o) { o.ctime_ns += 1; }));
}

TEST(ConfigCache, ACutOrForeignCacheIsAMiss) {
  const ConfigIdentity id = some_id();
  const std::string cache = encode_cache(id, "TREE");
  for (size_t n = 0; n < cache.size(); ++n) EXPECT_FALSE(cached_tree(cache.substr(0, n), id)) << n;
  EXPECT_FALSE(cached_tree(cache + "x", id));
  std::string other_format = cache;
  other_format[21] = '2';  // "gpudiag config cache 2"
  EXPECT_FALSE(cached_tree(other_format, id));
}

// A file changed within the clock's granularity could keep its identity: not cached yet.
TEST(ConfigCache, OnlyASettledFileIsCached) {
  ConfigIdentity id = some_id();
  const long long ctime = id.ctime_ns;
  EXPECT_FALSE(settled(id, ctime));
  EXPECT_FALSE(settled(id, ctime + kSettled_ns - 1));
  EXPECT_TRUE(settled(id, ctime + kSettled_ns));
  id.mtime_ns = ctime + 10;  // a clock set back: the later of the two counts
  EXPECT_FALSE(settled(id, ctime + kSettled_ns));
}

TEST(ConfigCache, OneNamePerConfigPath) {
  EXPECT_EQ(cache_file_name("/etc/gpudiag/gpudiag.yaml"), cache_file_name("/etc/gpudiag/gpudiag.yaml"));
  EXPECT_NE(cache_file_name("/etc/gpudiag/gpudiag.yaml"), cache_file_name("/etc/gpudiag/gpudiag2.yaml"));
  EXPECT_EQ(cache_file_name("/x").find('/'), std::string::npos);
}
