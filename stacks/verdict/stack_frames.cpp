#include "stacks/verdict/stack_frames.h"

#include <charconv>

namespace gpudiag {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool parse_long(std::string_view s, long& v) {
  s = trim(s);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

template <typename F>
void each_line(std::string_view text, F f) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (!f(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos))) return;
    if (nl == std::string_view::npos) return;
    pos = nl + 1;
  }
}

// "#3  0x00007f... rest": the rest, or nullopt-ish "" with ok=false.
bool frame_rest(std::string_view line, std::string_view& rest) {
  line = trim(line);
  if (line.size() < 2 || line[0] != '#' || line[1] < '0' || line[1] > '9') return false;
  std::size_t i = 1;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  rest = trim(line.substr(i));
  if (starts_with(rest, "0x")) {
    std::size_t sp = rest.find(' ');
    rest = sp == std::string_view::npos ? std::string_view() : trim(rest.substr(sp));
  }
  return true;
}

// A symbol without the tool's decorations: "clock_nanosleep@GLIBC_2.2.5" -> "clock_nanosleep",
// "foo+0x1a" -> "foo", and a demangled C++ name without its parameter list
// ("ns::f(std::chrono::duration<long>) const" -> "ns::f"; "operator()" keeps its own).
std::string_view plain_symbol(std::string_view s) {
  if (auto at = s.find('@'); at != std::string_view::npos && at > 0) s = s.substr(0, at);
  if (auto plus = s.rfind("+0x"); plus != std::string_view::npos && plus > 0) s = s.substr(0, plus);
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>' && depth > 0) --depth;
    else if (s[i] == '(' && depth == 0 && i > 0) {
      if (i >= 8 && s.substr(i - 8, 8) == "operator" && s.substr(i, 2) == "()") {
        ++i;
        continue;
      }
      // "(anonymous namespace)::f" is part of the name, not a parameter list.
      if (s.substr(i, 21) == "(anonymous namespace)") {
        i += 20;
        continue;
      }
      return s.substr(0, i);
    }
  }
  return s;
}

bool libc_module(std::string_view module) {
  std::string_view b = base_name(module);
  return starts_with(b, "libc.so") || starts_with(b, "libc-") || starts_with(b, "libpthread") ||
         starts_with(b, "ld-linux") || starts_with(b, "libdl") || starts_with(b, "librt");
}

// Without a module name (gdb with glibc's debug info, or no -m): glibc's own names.
bool libc_name(std::string_view function, std::string_view source) {
  if (source.find("sysdeps/") != std::string_view::npos || starts_with(source, "./nptl/") ||
      starts_with(source, "../nptl/") || source.find("/nptl/") != std::string_view::npos)
    return true;
  return starts_with(function, "__GI_") || starts_with(function, "__libc_") || starts_with(function, "__futex") ||
         starts_with(function, "__pthread") || starts_with(function, "___pthread") ||
         starts_with(function, "__lll_") || starts_with(function, "__internal_syscall");
}

bool in_libc(const NativeFrame& f) {
  if (!f.module.empty()) return libc_module(f.module);
  return libc_name(f.function, f.source);
}

}  // namespace

std::vector<NativeFrame> eu_stack_frames(std::string_view text, long tid) {
  std::vector<NativeFrame> out;
  bool mine = false;
  each_line(text, [&](std::string_view line) {
    if (starts_with(line, "TID ")) {
      if (mine) return false;  // its block ended
      std::string_view n = line.substr(4);
      if (auto colon = n.find(':'); colon != std::string_view::npos) n = n.substr(0, colon);
      long t = 0;
      mine = parse_long(n, t) && t == tid;
      return true;
    }
    std::string_view rest;
    if (!mine || !frame_rest(line, rest)) return true;
    if (out.size() >= 4 * kMaxRankFrames) return false;
    NativeFrame f;
    // "name - /path/module", " - /path/module" (no symbol), or "name" (no -m)
    std::size_t dash = rest.rfind(" - ");
    if (starts_with(rest, "- ")) {
      f.module = std::string(trim(rest.substr(2)));
    } else if (dash != std::string_view::npos) {
      f.function = std::string(plain_symbol(trim(rest.substr(0, dash))));
      f.module = std::string(trim(rest.substr(dash + 3)));
    } else {
      f.function = std::string(plain_symbol(rest));
    }
    out.push_back(std::move(f));
    return true;
  });
  return out;
}

std::vector<NativeFrame> gdb_frames(std::string_view text, long tid) {
  std::vector<NativeFrame> out;
  bool mine = false;
  const std::string lwp = "(LWP " + std::to_string(tid) + ")";
  each_line(text, [&](std::string_view line) {
    if (starts_with(line, "Thread ")) {
      if (mine) return false;
      mine = line.find(lwp) != std::string_view::npos;
      return true;
    }
    std::string_view rest;
    if (!mine || !frame_rest(line, rest)) return true;
    if (out.size() >= 4 * kMaxRankFrames) return false;
    // "in func (args) at file.c:12", "in func () from /lib/libc.so.6", "func (args) at ..." (frame 0 with no address)
    if (starts_with(rest, "in ")) rest = rest.substr(3);
    NativeFrame f;
    std::size_t paren = rest.find(" (");
    std::string_view name = paren == std::string_view::npos ? rest : rest.substr(0, paren);
    std::string_view tail = paren == std::string_view::npos ? std::string_view() : rest.substr(paren);
    if (name != "??") f.function = std::string(plain_symbol(trim(name)));
    if (auto from = tail.rfind(" from "); from != std::string_view::npos) f.module = std::string(trim(tail.substr(from + 6)));
    if (auto at = tail.rfind(" at "); at != std::string_view::npos) f.source = std::string(trim(tail.substr(at + 4)));
    out.push_back(std::move(f));
    return true;
  });
  return out;
}

std::vector<std::string> native_class_frames(const std::vector<NativeFrame>& frames) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < frames.size() && in_libc(frames[i])) ++i;
  // A stack that is libc alone (a thread that has not started yet) keeps its frames.
  if (i == frames.size()) i = 0;
  for (; i < frames.size() && out.size() < kMaxRankFrames; ++i) {
    const auto& f = frames[i];
    if (!f.function.empty()) out.push_back(bounded_frame(f.function));
    else out.push_back(bounded_frame("?? (" + std::string(base_name(f.module).empty() ? "?" : base_name(f.module)) + ")"));
  }
  return out;
}

std::string python_frame(std::string_view function, std::string_view file, int line) {
  std::string f = std::string(function.empty() ? "??" : function) + " (" + std::string(base_name(file));
  if (line > 0) f += ":" + std::to_string(line);
  return bounded_frame(f + ")");
}

std::vector<std::string> py_spy_frames(std::string_view text) {
  // Thread 1234 (idle): "MainThread"
  //     wait_for_x (train.py:88)
  std::vector<std::string> first, main;
  std::vector<std::string>* cur = nullptr;
  int threads = 0;
  each_line(text, [&](std::string_view line) {
    if (starts_with(line, "Thread ")) {
      ++threads;
      if (line.find("\"MainThread\"") != std::string_view::npos && main.empty()) cur = &main;
      else if (threads == 1) cur = &first;
      else cur = nullptr;
      return true;
    }
    if (!cur || !starts_with(line, "    ")) return true;
    std::string_view l = trim(line);
    if (l.empty() || l.back() != ')' || cur->size() >= kMaxRankFrames) return true;
    std::size_t open = l.rfind(" (");
    if (open == std::string_view::npos) return true;
    std::string_view where = l.substr(open + 2, l.size() - open - 3);
    std::size_t colon = where.rfind(':');
    long n = 0;
    int line_no = colon != std::string_view::npos && parse_long(where.substr(colon + 1), n) && n > 0 && n < (1L << 30)
                      ? static_cast<int>(n) : 0;
    cur->push_back(python_frame(l.substr(0, open), colon == std::string_view::npos ? where : where.substr(0, colon), line_no));
    return true;
  });
  return main.empty() ? first : main;
}

std::vector<std::string> python_class_frames(const PyStacks& stacks, long main_tid) {
  const PyThread* pick = nullptr;
  for (const auto& t : stacks.threads)
    if (t.tid == main_tid && !t.frames.empty()) pick = &t;
  if (!pick)
    for (const auto& t : stacks.threads)
      if (!t.frames.empty()) {
        pick = &t;
        break;
      }
  std::vector<std::string> out;
  if (!pick) return out;
  for (const auto& f : pick->frames) {
    if (out.size() >= kMaxRankFrames) break;
    out.push_back(python_frame(f.function, f.file, f.line));
  }
  return out;
}

}  // namespace gpudiag
