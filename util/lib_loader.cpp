#include "util/lib_loader.h"

#include <link.h>

namespace gpudiag {

Library load_library(const std::string& configured, const std::vector<std::string>& candidates) {
  Library lib;
  std::vector<std::string> list = configured.empty() ? candidates : std::vector<std::string>{configured};
  for (const auto& name : list) {
    // RTLD_LOCAL keeps the driver's symbols from clashing with each other's; NOW makes
    // a broken install fail here, not halfway through a GPU call.
    void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      std::string why = e ? e : "unknown error";
      // dlerror repeats the name: "libx.so.1: cannot open shared object file: ..."
      if (why.rfind(name + ": ", 0) == 0) why.erase(0, name.size() + 2);
      lib.tried.push_back(name + " (" + why + ")");
      continue;
    }
    lib.handle = h;
    lib.path = name;
    struct link_map* map = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) lib.path = map->l_name;
    break;
  }
  return lib;
}

std::string describe_attempts(const Library& lib) {
  // Usually every candidate failed the same way ("No such file"): say it once.
  std::string reason;
  bool same = true;
  for (const auto& t : lib.tried) {
    std::string why = t.substr(t.find(" (") + 2);
    if (reason.empty()) reason = why;
    else if (why != reason) same = false;
  }
  std::string out = "tried ";
  for (std::size_t i = 0; i < lib.tried.size(); ++i)
    out += (i ? ", " : "") + (same ? lib.tried[i].substr(0, lib.tried[i].find(" (")) : lib.tried[i]);
  if (same && !reason.empty()) out += ": " + reason.substr(0, reason.size() - 1);
  return out;
}

}  // namespace gpudiag
