#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#include "config/config_cache.h"
#include "spank/slurm/plugin_config.h"

using namespace gpudiag;

namespace {

long long now_ns() {
  struct timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}
// As if the file had been written long ago: it may be cached.
long long later() { return now_ns() + 3 * kSettled_ns; }

class PluginConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-plugin-config-XXXXXX";
    ASSERT_TRUE(mkdtemp(tmpl));
    top = tmpl;
    ::chmod(top.c_str(), 0755);
    config = top + "/gpudiag.yaml";
    write(config, "plugin:\n  prefix: always\n");
    place.dir = top + "/cache";
    place.yaml_module = GPUDIAG_YAML_MODULE;
    place.may_write = true;
  }
  void TearDown() override { std::system(("rm -rf '" + top + "'").c_str()); }

  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }
  std::string cache_path() const { return place.dir + "/" + cache_file_name(config); }
  ConfigLoad load(long long now, Result<Config>* out = nullptr) {
    ConfigLoad how;
    auto cfg = load_config_cached(config, place, now, &how);
    EXPECT_TRUE(cfg) << cfg.error();
    if (out) *out = cfg;
    return how;
  }

  std::string top, config;
  ConfigCachePlace place;
};

bool is_root() { return ::geteuid() == 0; }

}  // namespace

TEST_F(PluginConfig, TheFirstReadKeepsTheDocumentAndTheNextReadsIt) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  struct stat st {};
  ASSERT_EQ(::stat(cache_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0644u);  // the config's own read bits
  Result<Config> cfg = Config{};
  EXPECT_EQ(load(later(), &cfg), ConfigLoad::cache);
  EXPECT_EQ(cfg->plugin.prefix, "always");
}

TEST_F(PluginConfig, AChangedFileIsReadAgain) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  write(config, "plugin:\n  prefix: never\n");
  Result<Config> cfg = Config{};
  EXPECT_EQ(load(later(), &cfg), ConfigLoad::yaml_cached);
  EXPECT_EQ(cfg->plugin.prefix, "never");
}

TEST_F(PluginConfig, AFileJustWrittenIsNotCachedYet) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  EXPECT_EQ(load(now_ns()), ConfigLoad::yaml);
  EXPECT_NE(::access(cache_path().c_str(), F_OK), 0);
}

TEST_F(PluginConfig, AUsersSrunReadsTheCacheButNeverWritesOne) {
  place.may_write = false;
  EXPECT_EQ(load(later()), ConfigLoad::yaml);
  EXPECT_NE(::access(place.dir.c_str(), F_OK), 0);
}

TEST_F(PluginConfig, AConfigOnlyRootMayReadGivesACacheOnlyRootMayRead) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  ::chmod(config.c_str(), 0600);
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  struct stat st {};
  ASSERT_EQ(::stat(cache_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Adversary review 3, B1: the cache is for every user only where every user may read the
// config by its path: a dir above it closed to others, a group-only file or an ACL keep it
// root's (0600).
TEST_F(PluginConfig, ACacheIsPublicOnlyWhereEveryUserMayReadTheConfigByItsPath) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  const std::string closed = top + "/closed";
  ASSERT_EQ(::mkdir(closed.c_str(), 0700), 0);
  config = closed + "/gpudiag.yaml";
  write(config, "plugin:\n  prefix: always\n");
  ::chmod(config.c_str(), 0644);
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  struct stat st {};
  ASSERT_EQ(::stat(cache_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "a 0644 file in a 0700 dir";

  ::chmod(closed.c_str(), 0755);
  ::chmod(config.c_str(), 0640);
  write(config, "plugin:\n  prefix: never\n");
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  ASSERT_EQ(::stat(cache_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "a group-only file";

  ::chmod(config.c_str(), 0644);
  if (std::system(("setfacl -m u:nobody:--- '" + config + "' 2>/dev/null").c_str()) == 0) {
    EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
    ASSERT_EQ(::stat(cache_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "an ACL that keeps nobody out";
  }
}

// Another user's cache, or a dir another user may write, is never read.
TEST_F(PluginConfig, APlantedCacheIsNeverRead) {
  if (!is_root()) GTEST_SKIP() << "chown needs root";
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  ASSERT_EQ(::chown(cache_path().c_str(), 65534, 65534), 0);
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);  // ignored, then replaced by root's
  ASSERT_EQ(::chmod(cache_path().c_str(), 0666), 0);
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  ASSERT_EQ(::chmod(place.dir.c_str(), 0777), 0);
  EXPECT_EQ(load(later()), ConfigLoad::yaml);  // neither read nor written
  ASSERT_EQ(::chmod(place.dir.c_str(), 0755), 0);
  ASSERT_EQ(::chown(place.dir.c_str(), 65534, 65534), 0);
  EXPECT_EQ(load(later()), ConfigLoad::yaml);
}

TEST_F(PluginConfig, ALinkInPlaceOfTheCacheIsNeverFollowed) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  const std::string elsewhere = top + "/elsewhere";
  ASSERT_EQ(::rename(cache_path().c_str(), elsewhere.c_str()), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), cache_path().c_str()), 0);
  ConfigLoad how;
  auto cfg = load_config_cached(config, place, later(), &how);
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(how, ConfigLoad::yaml);  // not read, and not replaced through the link
  struct stat st {};
  ASSERT_EQ(::lstat(cache_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_F(PluginConfig, AGarbledCacheIsParsedAgain) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  write(cache_path(), "gpudiag config cache 1\nnot really");
  ::chmod(cache_path().c_str(), 0644);
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
}

// A hit needs no YAML reader at all; a miss without one says what to do.
TEST_F(PluginConfig, ACacheHitNeedsNoYamlReaderAndAMissNamesTheFix) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  EXPECT_EQ(load(later()), ConfigLoad::yaml_cached);
  ConfigCachePlace no_reader = place;
  no_reader.yaml_module = top + "/missing/gpudiag_yaml.so";
  ConfigLoad how;
  auto hit = load_config_cached(config, no_reader, later(), &how);
  ASSERT_TRUE(hit) << hit.error();
  EXPECT_EQ(how, ConfigLoad::cache);
  no_reader.dir.clear();
  auto miss = load_config_cached(config, no_reader, later(), &how);
  ASSERT_FALSE(miss);
  EXPECT_NE(miss.error().find("gpudiag: cannot read config " + config + ": cannot load its YAML reader"), std::string::npos)
      << miss.error();
  EXPECT_NE(miss.error().find("reinstall gpudiag"), std::string::npos);
}

TEST_F(PluginConfig, ABrokenConfigIsAnErrorAndNeverCached) {
  if (!is_root()) GTEST_SKIP() << "the cache is root's";
  write(config, "plugin:\n  prefx: always\n");
  ConfigLoad how;
  auto cfg = load_config_cached(config, place, later(), &how);
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().find("gpudiag: " + config + ":2: unknown key 'plugin.prefx'"), std::string::npos) << cfg.error();
  EXPECT_NE(::access(cache_path().c_str(), F_OK), 0);
}

TEST_F(PluginConfig, AMissingConfigNamesTheFix) {
  ConfigLoad how;
  auto cfg = load_config_cached(top + "/none.yaml", place, later(), &how);
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().find("cannot read config " + top + "/none.yaml"), std::string::npos) << cfg.error();
  EXPECT_NE(cfg.error().find("plugstack.conf"), std::string::npos) << cfg.error();
}
