// The plugin's config: the cache first, the YAML through gpudiag_yaml.so when it misses
// (plugin_config.h).
#include "spank/slurm/plugin_config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "config/config_cache.h"
#include "config/config_source.h"
#include "config/config_tree.h"
#include "spank/slurm/plugin_args.h"
#include "util/private_file.h"

namespace gpudiag {
namespace {

using YamlTreeFn = int (*)(const char*, std::size_t, const char*, char**, std::size_t*);

// The module next to gpudiag.so itself (dladdr): the package installs them together, and
// the tests load gpudiag.so from the build tree.
std::string module_beside_plugin() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&module_beside_plugin), &info) == 0 || !info.dli_fname) return "gpudiag_yaml.so";
  std::string self = info.dli_fname;
  const auto slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/gpudiag_yaml.so";
}

// The document's bytes from YAML text, or an error message. Loaded once per process and
// never unloaded (the C++ runtime it brings cannot be).
Result<std::string> yaml_tree_bytes(const std::string& module, const std::string& text, const std::string& source) {
  static std::string loaded;
  static YamlTreeFn fn = nullptr;
  if (!fn || loaded != module) {
    void* handle = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      return Result<std::string>::failure("gpudiag: cannot read config " + source + ": cannot load its YAML reader (" +
                                          std::string(why ? why : module) + "): reinstall gpudiag");
    }
    auto found = reinterpret_cast<YamlTreeFn>(::dlsym(handle, "gpudiag_yaml_tree_v1"));
    if (!found)
      return Result<std::string>::failure("gpudiag: cannot read config " + source + ": " + module +
                                          " is not gpudiag's YAML reader of this version: reinstall gpudiag");
    fn = found;
    loaded = module;
  }
  char* out = nullptr;
  std::size_t len = 0;
  const int rc = fn(text.data(), text.size(), source.c_str(), &out, &len);
  if (!out) return Result<std::string>::failure("gpudiag: cannot read config " + source + ": out of memory");
  std::string bytes(out, len);
  std::free(out);
  if (rc != 0) return Result<std::string>::failure(bytes);
  return bytes;
}

// The cache dir, when it is root's and no one else may write it (a dir another user made
// or may write could hold anything).
int open_cache_dir(const std::string& dir) {
  DirOpen d = open_private_dir(dir.c_str(), 0);
  return d.fd;
}

std::optional<std::string> read_cache(const std::string& dir, const std::string& name) {
  const int dfd = open_cache_dir(dir);
  if (dfd < 0) return std::nullopt;
  const uid_t root = 0;
  OpenedFile f = open_regular_file(dfd, name.c_str(), &root);
  ::close(dfd);
  if (f.why != OpenedFile::ok) return std::nullopt;
  struct stat st;
  std::optional<std::string> out;
  if (::fstat(f.fd, &st) == 0 && (st.st_mode & 022) == 0 && st.st_size > 0 &&
      static_cast<std::size_t>(st.st_size) <= kMaxCacheBytes) {
    std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
    if (read_up_to(f.fd, bytes.data(), bytes.size()) == st.st_size) out = std::move(bytes);
  }
  ::close(f.fd);
  return out;
}

bool has_access_acl(const char* path) {
  return ::getxattr(path, "system.posix_acl_access", nullptr, 0) >= 0 || errno == ERANGE;
}

// Whether any user may read the config by its path: the file readable by others and every
// directory above it searchable by others, none of them with an access ACL (which may deny
// someone what the mode allows). Where not, the cache is root's alone (0600): srun then
// reads the YAML as before. Copying the file's own read bits was not enough: a 0644 file in
// a 0700 dir, an ACL, or a group other than root's (adversary review 3, B1).
bool others_may_read(const std::string& path, const struct stat& st) {
  if ((st.st_mode & S_IROTH) == 0 || has_access_acl(path.c_str())) return false;
  char real[PATH_MAX];
  if (!::realpath(path.c_str(), real)) return false;
  std::string dir = real;
  while (true) {
    const auto slash = dir.rfind('/');
    if (slash == std::string::npos) return false;
    dir.resize(slash == 0 ? 1 : slash);
    struct stat d;
    if (::stat(dir.c_str(), &d) != 0 || (d.st_mode & S_IXOTH) == 0 || has_access_acl(dir.c_str())) return false;
    if (dir == "/") return true;
  }
}

// Root only. The cache may be read by every user only where every user may read the config.
bool write_cache(const std::string& dir, const std::string& name, const std::string& bytes, bool public_config) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  const int dfd = open_cache_dir(dir);
  if (dfd < 0) return false;
  const mode_t mode = public_config ? 0644 : 0600;
  const Replace r = replace_file(dfd, name.c_str(), random_names("." + name + ".", ".tmp", 4), bytes, mode);
  ::close(dfd);
  return r.step == Replace::done;
}

std::string unreadable_hint(int err) {
  // srun reads it as the user, slurmstepd as root: a root-only file fails only in srun.
  return err == EACCES ? " (srun reads it as the user: make it readable by all users)"
                       : " (fix config= on the gpudiag.so line in plugstack.conf)";
}

long long now_ns() {
  struct timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

}  // namespace

Result<Config> load_config_cached(const std::string& path, const ConfigCachePlace& place, long long now,
                                  ConfigLoad* how) {
  ConfigLoad dummy;
  ConfigLoad& h = how ? *how : dummy;
  h = ConfigLoad::failed;
  auto source = ConfigSource::open(path);
  if (!source) {
    std::string message = source.error();
    if (::access(path.c_str(), R_OK) != 0) message += unreadable_hint(errno);
    return Result<Config>::failure(message);
  }
  const ConfigIdentity id = identity_of(path, source.value().stat());
  const std::string name = cache_file_name(path);
  if (!place.dir.empty()) {
    if (auto cache = read_cache(place.dir, name)) {
      if (auto bytes = cached_tree(*cache, id)) {
        if (auto tree = tree_from_bytes(*bytes)) {
          h = ConfigLoad::cache;
          return read_config(*tree, path);
        }
      }
    }
  }
  auto text = source.value().text();
  if (!text) return Result<Config>::failure(text.error());
  auto bytes = yaml_tree_bytes(place.yaml_module, *text, path);
  if (!bytes) return Result<Config>::failure(bytes.error());
  auto tree = tree_from_bytes(*bytes);
  if (!tree) return Result<Config>::failure("gpudiag: cannot read config " + path + ": its YAML reader gave no document: reinstall gpudiag");
  auto cfg = read_config(*tree, path);
  h = ConfigLoad::yaml;
  // A config with errors is not kept: each step says so again, until it is fixed.
  if (cfg && !place.dir.empty() && place.may_write && settled(id, now) &&
      write_cache(place.dir, name, encode_cache(id, *bytes), others_may_read(path, source.value().stat())))
    h = ConfigLoad::yaml_cached;
  return cfg;
}

Result<Config> load_plugin_config(int ac, char** av) {
  std::vector<std::string> args(av, av + ac);
  auto parsed = parse_plugin_args(args);
  if (!parsed) return Result<Config>::failure(parsed.error());
  const std::string path = parsed->config_given ? parsed->config : kDefaultConfigPath;
  struct stat st;
  if (!parsed->config_given && ::stat(path.c_str(), &st) != 0) return Config{};
  ConfigCachePlace place;
  place.dir = parsed->config_cache;
  place.yaml_module = module_beside_plugin();
  place.may_write = ::geteuid() == 0;
  return load_config_cached(path, place, now_ns());
}

}  // namespace gpudiag
