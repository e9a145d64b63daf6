#include "stacks/pyframes/elf_image.h"

#include <cstring>
#include <string_view>

namespace gpudiag::pyframes {
namespace {

constexpr std::uint32_t kPtLoad = 1;
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtDynsym = 11;
// Bounds on what a file may make us read: libpython's own tables are a fraction of these.
constexpr std::uint64_t kMaxHeaders = 4096;
constexpr std::uint64_t kMaxSymbols = 1u << 20;
constexpr std::uint64_t kMaxStrtab = 64u << 20;
constexpr std::uint64_t kSymChunk = 4096;  // symbols read per batch

template <typename T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct Section {
  std::uint32_t name, type, link;
  std::uint64_t addr, offset, size, entsize;
};

bool in_file(std::uint64_t off, std::uint64_t len, std::uint64_t size) { return off <= size && len <= size - off; }

}  // namespace

ElfResult parse_elf(const FileRead& read, std::uint64_t size, std::chrono::steady_clock::time_point deadline) {
  ElfResult r;
  const auto late = [&] { return std::chrono::steady_clock::now() >= deadline; };
  unsigned char eh[64];
  if (size < sizeof eh || !read(0, eh, sizeof eh)) return {std::nullopt, "shorter than an ELF header"};
  if (std::memcmp(eh, "\x7f" "ELF", 4) != 0) return {std::nullopt, "not an ELF file"};
  if (eh[4] != 2 || eh[5] != 1) return {std::nullopt, "not a 64-bit little-endian ELF file"};
  const auto phoff = get<std::uint64_t>(eh + 32), shoff = get<std::uint64_t>(eh + 40);
  const auto phentsize = get<std::uint16_t>(eh + 54), phnum = get<std::uint16_t>(eh + 56);
  const auto shentsize = get<std::uint16_t>(eh + 58), shnum = get<std::uint16_t>(eh + 60);
  const auto shstrndx = get<std::uint16_t>(eh + 62);
  ElfFacts f;

  if (phentsize != 56 || phnum > kMaxHeaders || !in_file(phoff, std::uint64_t{phnum} * 56, size))
    return {std::nullopt, "bad program headers"};
  std::vector<unsigned char> ph(std::size_t{phnum} * 56);
  if (!ph.empty() && !read(phoff, ph.data(), ph.size())) return {std::nullopt, "unreadable program headers"};
  for (std::size_t i = 0; i < phnum; ++i) {
    const unsigned char* p = ph.data() + i * 56;
    if (get<std::uint32_t>(p) != kPtLoad) continue;
    f.loads.push_back({get<std::uint64_t>(p + 16), get<std::uint64_t>(p + 8), get<std::uint64_t>(p + 32),
                       get<std::uint64_t>(p + 40)});
  }

  // Section headers: a stripped file may have none; then only the program headers help.
  std::vector<Section> sections;
  if (shnum && shentsize == 64 && shnum <= kMaxHeaders && in_file(shoff, std::uint64_t{shnum} * 64, size)) {
    std::vector<unsigned char> sh(std::size_t{shnum} * 64);
    if (read(shoff, sh.data(), sh.size())) {
      for (std::size_t i = 0; i < shnum; ++i) {
        const unsigned char* p = sh.data() + i * 64;
        sections.push_back({get<std::uint32_t>(p), get<std::uint32_t>(p + 4), get<std::uint32_t>(p + 40),
                            get<std::uint64_t>(p + 16), get<std::uint64_t>(p + 24), get<std::uint64_t>(p + 32),
                            get<std::uint64_t>(p + 56)});
      }
    }
  }
  auto read_strtab = [&](const Section& s, std::string& out) {
    if (s.size > kMaxStrtab || !in_file(s.offset, s.size, size)) return false;
    out.resize(s.size);
    return s.size == 0 || read(s.offset, out.data(), out.size());
  };
  auto name_at = [](const std::string& tab, std::uint64_t off) -> std::string_view {
    if (off >= tab.size()) return {};
    std::size_t end = tab.find('\0', off);
    if (end == std::string::npos) return {};
    return std::string_view(tab).substr(off, end - off);
  };

  std::string shstr;
  if (shstrndx < sections.size() && read_strtab(sections[shstrndx], shstr)) {
    for (const Section& s : sections)
      if (name_at(shstr, s.name) == ".PyRuntime") f.pyruntime_section = s.addr;
  }
  for (std::uint32_t want : {kShtDynsym, kShtSymtab}) {
    for (const Section& s : sections) {
      if (s.type != want || s.entsize != 24 || s.link >= sections.size()) continue;
      const std::uint64_t count = s.size / 24;
      std::string strtab;
      if (late()) return {std::nullopt, "took longer than its budget", true};
      if (count > kMaxSymbols || !in_file(s.offset, count * 24, size) || !read_strtab(sections[s.link], strtab)) continue;
      f.stripped = false;
      std::vector<unsigned char> chunk;
      for (std::uint64_t first = 0; first < count; first += kSymChunk) {
        if (late()) return {std::nullopt, "took longer than its budget", true};
        const std::uint64_t n = std::min(kSymChunk, count - first);
        chunk.resize(n * 24);
        if (!read(s.offset + first * 24, chunk.data(), chunk.size())) break;
        for (std::uint64_t i = 0; i < n; ++i) {
          const unsigned char* p = chunk.data() + i * 24;
          const auto value = get<std::uint64_t>(p + 8);
          if (value == 0 || get<std::uint16_t>(p + 6) == 0) continue;  // undefined here
          std::string_view name = name_at(strtab, get<std::uint32_t>(p));
          if (name == "_PyRuntime" && !f.py_runtime) f.py_runtime = value;
          else if (name == "Py_Version" && !f.py_version) f.py_version = value;
          else if (name == "PyCode_Type" && !f.code_type) f.code_type = value;
        }
      }
      break;  // the first table of this kind that could be read
    }
  }
  r.facts = std::move(f);
  return r;
}

std::optional<std::uint64_t> file_offset_of(const ElfFacts& facts, std::uint64_t vaddr) {
  for (const ElfLoad& l : facts.loads)
    if (vaddr >= l.vaddr && vaddr - l.vaddr < l.filesz) return l.offset + (vaddr - l.vaddr);
  return std::nullopt;
}

}  // namespace gpudiag::pyframes
