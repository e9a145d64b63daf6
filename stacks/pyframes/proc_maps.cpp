#include "stacks/pyframes/proc_maps.h"

#include <cstdio>
#include <cstdlib>

namespace gpudiag::pyframes {
namespace {

bool hex(std::string_view& s, std::uint64_t& v, char stop) {
  v = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] != stop; ++i) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0 || i >= 16) return false;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  if (i == 0 || i >= s.size()) return false;
  s.remove_prefix(i + 1);
  return true;
}

std::string_view base_name(std::string_view path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::vector<Mapping> parse_maps(std::string_view text) {
  std::vector<Mapping> out;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    Mapping m;
    std::uint64_t major = 0, minor = 0;
    if (!hex(line, m.start, '-') || !hex(line, m.end, ' ') || m.end <= m.start) continue;
    std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp != 4) continue;
    m.perms = std::string(line.substr(0, 4));
    line.remove_prefix(5);
    if (!hex(line, m.offset, ' ') || !hex(line, major, ':') || !hex(line, minor, ' ')) continue;
    m.dev_major = static_cast<unsigned>(major);
    m.dev_minor = static_cast<unsigned>(minor);
    std::size_t i = 0;
    m.inode = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && i < 20; ++i) m.inode = m.inode * 10 + (line[i] - '0');
    if (i == 0) continue;
    line.remove_prefix(i);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (m.inode != 0 && !line.empty() && line.front() == '/') m.path = std::string(line);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<const Mapping*> python_image_candidates(const std::vector<Mapping>& maps, const std::string& exe) {
  std::vector<const Mapping*> lib, bin, main;
  auto seen = [](const std::vector<const Mapping*>& v, const Mapping& m) {
    for (const Mapping* c : v)
      if (c->inode == m.inode && c->dev_major == m.dev_major && c->dev_minor == m.dev_minor) return true;
    return false;
  };
  for (const Mapping& m : maps) {
    if (m.path.empty()) continue;
    std::string_view name = base_name(m.path);
    if (name.substr(0, 10) == "libpython3") {
      if (!seen(lib, m)) lib.push_back(&m);
    } else if (name.substr(0, 7) == "python3") {
      if (!seen(bin, m)) bin.push_back(&m);
    } else if (!exe.empty() && m.path == exe) {
      if (!seen(main, m)) main.push_back(&m);
    }
  }
  std::vector<const Mapping*> out = lib;
  for (const Mapping* m : bin)
    if (!seen(out, *m)) out.push_back(m);
  for (const Mapping* m : main)
    if (!seen(out, *m)) out.push_back(m);
  return out;
}

std::uint64_t address_of_file_offset(const std::vector<Mapping>& maps, const Mapping& file, std::uint64_t file_offset) {
  for (const Mapping& m : maps) {
    if (m.inode != file.inode || m.dev_major != file.dev_major || m.dev_minor != file.dev_minor) continue;
    const std::uint64_t size = m.end - m.start;
    if (file_offset >= m.offset && file_offset - m.offset < size) return m.start + (file_offset - m.offset);
  }
  return 0;
}

}  // namespace gpudiag::pyframes
