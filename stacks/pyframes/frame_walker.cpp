#include "stacks/pyframes/frame_walker.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "stacks/pyframes/line_table.h"
#include "stacks/pyframes/python_layout.h"

namespace gpudiag::pyframes {
namespace {

using Clock = std::chrono::steady_clock;

// Reads through the deadline: past it every read fails with ETIMEDOUT.
class Bounded {
 public:
  Bounded(MemoryReader& mem, Clock::time_point deadline) : mem_(mem), deadline_(deadline) {}
  bool read(std::uint64_t addr, void* out, std::size_t len) {
    if (Clock::now() >= deadline_) {
      errno_ = ETIMEDOUT;
      return false;
    }
    if (addr == 0 || addr + len < addr) {
      errno_ = EFAULT;
      return false;
    }
    if (mem_.read(addr, out, len)) return true;
    errno_ = mem_.error() ? mem_.error() : EFAULT;
    return false;
  }
  bool block(std::uint64_t addr, std::size_t len, std::vector<unsigned char>& out) {
    // Never a read of nothing: a table's offsets may make a length 0.
    out.assign(std::max<std::size_t>(len, 1), 0);
    return read(addr, out.data(), out.size());
  }
  int error() const { return errno_; }
  // A read that failed because the process is gone, reading was refused or time ran
  // out ends the whole walk; a bad address ends only the chain that led there.
  bool fatal() const { return errno_ == ESRCH || errno_ == EPERM || errno_ == EACCES || errno_ == ETIMEDOUT; }

 private:
  MemoryReader& mem_;
  Clock::time_point deadline_;
  int errno_ = 0;
};

template <typename T>
T at(const std::vector<unsigned char>& b, std::uint64_t off) {
  T v{};
  if (off <= b.size() && sizeof v <= b.size() - off) std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

void put_utf8(std::string& s, std::uint32_t c) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | c >> 6);
    s += static_cast<char>(0x80 | (c & 63));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | c >> 12);
    s += static_cast<char>(0x80 | ((c >> 6) & 63));
    s += static_cast<char>(0x80 | (c & 63));
  } else {
    s += static_cast<char>(0xF0 | c >> 18);
    s += static_cast<char>(0x80 | ((c >> 12) & 63));
    s += static_cast<char>(0x80 | ((c >> 6) & 63));
    s += static_cast<char>(0x80 | (c & 63));
  }
}

struct CodeInfo {
  bool ok = false;  // function and file were read
  // What it tells the layout check: nothing (PyCode_Type unknown, or the cap on code
  // objects reached), its type is PyCode_Type, it is not, or it cannot be read at all.
  enum Check { kUnchecked, kIsCode, kNotCode, kUnreadable } check = kUnchecked;
  std::string function, file;
  int first_line = 0;
  std::vector<unsigned char> linetable;
};

class Walker {
 public:
  Walker(Bounded& mem, const PyLayout& l, const WalkInput& in, const WalkLimits& lim)
      : mem_(mem), l_(l), in_(in), lim_(lim) {}

  // A compact str object (what code objects hold), as UTF-8; nullopt when unreadable.
  std::optional<std::string> unicode(std::uint64_t addr) {
    std::vector<unsigned char> head;
    const std::uint64_t need = std::max({l_.unicode_state + 4, l_.unicode_length + 8, l_.unicode_compact_data});
    if (!mem_.block(addr, need, head)) return std::nullopt;
    const auto state = at<std::uint32_t>(head, l_.unicode_state);
    const auto length = at<std::int64_t>(head, l_.unicode_length);
    const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) || length < 0) return std::nullopt;
    const std::size_t n = static_cast<std::size_t>(std::min<std::int64_t>(length, lim_.string_chars));
    std::vector<unsigned char> data;
    if (n && !mem_.block(addr + (ascii ? l_.unicode_ascii_data : l_.unicode_compact_data), n * kind, data))
      return std::nullopt;
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t c = kind == 1 ? data[i] : kind == 2 ? at<std::uint16_t>(data, i * 2) : at<std::uint32_t>(data, i * 4);
      put_utf8(out, c);
    }
    if (static_cast<std::size_t>(length) > n) out += "...";
    return out;
  }

  const CodeInfo& code(std::uint64_t addr) {
    auto found = codes_.find(addr);
    if (found != codes_.end()) return found->second;
    static const CodeInfo kBad;
    if (codes_.size() >= lim_.codes) return kBad;
    CodeInfo& c = codes_[addr];
    std::vector<unsigned char> head;
    const std::uint64_t need = std::max({l_.code_filename, l_.code_name, l_.code_qualname, l_.code_linetable,
                                         l_.code_firstlineno, l_.ob_type}) + 8;
    if (!mem_.block(addr, need, head)) {
      c.check = CodeInfo::kUnreadable;
      return c;
    }
    if (in_.code_type) {
      c.check = at<std::uint64_t>(head, l_.ob_type) == *in_.code_type ? CodeInfo::kIsCode : CodeInfo::kNotCode;
      if (c.check == CodeInfo::kNotCode) return c;
    }
    auto file = unicode(at<std::uint64_t>(head, l_.code_filename));
    auto name = unicode(at<std::uint64_t>(head, l_.code_qualname));
    if (!name) name = unicode(at<std::uint64_t>(head, l_.code_name));
    if (!file || !name) return c;
    c.file = std::move(*file);
    c.function = std::move(*name);
    c.first_line = at<std::int32_t>(head, l_.code_firstlineno);
    // The line table is a bytes object; without it the line is unknown, the frame still named.
    const auto table = at<std::uint64_t>(head, l_.code_linetable);
    std::vector<unsigned char> bhead;
    if (table && mem_.block(table, std::max(l_.bytes_size + 8, l_.bytes_data), bhead)) {
      const auto size = at<std::int64_t>(bhead, l_.bytes_size);
      if (size > 0) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::int64_t>(size, lim_.linetable_bytes));
        if (!mem_.block(table + l_.bytes_data, n, c.linetable)) c.linetable.clear();
      }
    }
    c.ok = true;
    return c;
  }

  // One thread's frames, innermost first; `note` says why they stop early.
  void frames(std::uint64_t frame, PyThread& t) {
    std::set<std::uint64_t> seen;
    const std::uint64_t need = std::max({l_.frame_previous, l_.frame_code, l_.frame_instr, l_.frame_owner}) + 8;
    std::vector<unsigned char> f;
    for (std::size_t n = 0; frame; ++n) {
      if (n >= lim_.frames) {
        t.note = "cut at " + std::to_string(lim_.frames) + " frames";
        return;
      }
      if (!seen.insert(frame).second) {
        t.note = "the frame chain loops back on itself (memory changing under the reader, or not CPython's)";
        return;
      }
      if (!mem_.block(frame, need, f)) {
        t.note = "a frame is unreadable (memory changing under the reader, or not CPython's)";
        return;
      }
      const std::uint64_t previous = at<std::uint64_t>(f, l_.frame_previous);
      const int owner = at<std::uint8_t>(f, l_.frame_owner);
      const std::uint64_t code_addr = at<std::uint64_t>(f, l_.frame_code) & l_.code_tag_mask;
      frame = previous;
      if ((owner >= l_.skip_owner_from && owner <= l_.skip_owner_to) || code_addr == 0) continue;
      const CodeInfo& c = code(code_addr);
      if (c.check == CodeInfo::kNotCode) {
        // Not a frame, or not this layout: what it calls `previous` leads nowhere known.
        ++bad_codes_;
        t.note = "a frame's code object is not a code object (memory changing under the reader, or not this "
                 "layout)";
        return;
      }
      if (c.check == CodeInfo::kUnreadable && !mem_.fatal()) ++bad_codes_;
      if (c.check == CodeInfo::kIsCode) ++good_codes_;
      if (!c.ok) {
        if (mem_.fatal()) return;
        t.frames.push_back({"<unreadable code object>", "?", 0});
        continue;
      }
      int line = c.first_line > 0 ? c.first_line : 0;
      const std::uint64_t instr = at<std::uint64_t>(f, l_.frame_instr);
      const std::uint64_t start = code_addr + l_.code_adaptive;
      if (instr >= start && instr - start < (std::uint64_t{1} << 32)) {
        int found = line_for_offset(c.linetable.data(), c.linetable.size(), c.first_line, instr - start);
        if (found > 0) line = found;
      }
      t.frames.push_back({c.function, c.file, line});
    }
  }

  void walk(WalkResult& r, std::uint64_t runtime) {
    std::vector<unsigned char> rt;
    auto fail = [&](const std::string& why) {
      r.stacks.threads.clear();
      r.stacks.why_none = "no Python frames: " + why;
      r.read_errno = mem_.fatal() ? mem_.error() : 0;
    };
    std::uint64_t interp = 0;
    if (!mem_.read(runtime + l_.runtime_interpreters_head, &interp, 8)) return fail("_PyRuntime is unreadable");
    if (!interp) return fail("the interpreter is not running (not yet initialized, or finalized)");
    std::uint64_t gil_holder = 0;
    std::int32_t gil_locked = 0;
    auto read_gil = [&](std::uint64_t base) {
      gil_holder = 0;
      gil_locked = 0;
      if (!mem_.read(base + l_.gil_locked, &gil_locked, 4) || !mem_.read(base + l_.gil_holder, &gil_holder, 8))
        gil_locked = 0;
    };
    if (l_.gil_in_runtime) read_gil(runtime);
    std::set<std::uint64_t> interps, tstates;
    const std::uint64_t tneed =
        std::max({l_.tstate_next, l_.tstate_interp, l_.tstate_native_thread_id, l_.tstate_frame}) + 8;
    std::vector<unsigned char> ts;
    bool capped = false;
    for (std::size_t i = 0; interp && i < lim_.interpreters && interps.insert(interp).second; ++i) {
      if (!l_.gil_in_runtime) read_gil(interp);
      std::uint64_t tstate = 0, next_interp = 0;
      if (!mem_.read(interp + l_.interp_threads_head, &tstate, 8) || !mem_.read(interp + l_.interp_next, &next_interp, 8)) {
        if (mem_.fatal()) return fail(errno_text());
        break;
      }
      while (tstate && tstates.insert(tstate).second) {
        if (r.stacks.threads.size() >= lim_.threads) {
          capped = true;
          break;
        }
        if (!mem_.block(tstate, tneed, ts)) {
          if (mem_.fatal()) return fail(errno_text());
          ++bad_threads_;
          break;
        }
        // A thread state names its interpreter: one that does not is not a thread state
        // of this layout (or was freed just now), and its `next` leads nowhere known.
        if (at<std::uint64_t>(ts, l_.tstate_interp) != interp) {
          ++bad_threads_;
          break;
        }
        ++good_threads_;
        PyThread t{static_cast<long>(at<std::uint64_t>(ts, l_.tstate_native_thread_id)),
                   gil_locked != 0 && gil_holder == tstate, {}, ""};
        std::uint64_t frame = at<std::uint64_t>(ts, l_.tstate_frame);
        if (l_.cframe_current_frame && frame) {
          std::uint64_t current = 0;
          if (mem_.read(frame + *l_.cframe_current_frame, &current, 8)) frame = current;
          else frame = 0, t.note = "the thread's C frame is unreadable";
        }
        frames(frame, t);
        if (mem_.fatal()) return fail(errno_text());
        r.stacks.threads.push_back(std::move(t));
        tstate = at<std::uint64_t>(ts, l_.tstate_next);
      }
      interp = next_interp;
    }
    if (const std::string misfit = layout_misfit(); !misfit.empty()) return fail(misfit);
    bool any = false;
    for (const PyThread& t : r.stacks.threads) any = any || !t.frames.empty();
    if (!any) {
      if (r.stacks.threads.empty())
        return fail("no thread states found under the interpreter (it is starting or exiting, or its memory does "
                    "not fit " + l_.method + ")");
      r.stacks.why_none = "no Python frames: no thread is running Python code (" +
                          std::to_string(r.stacks.threads.size()) + " thread state(s), all idle)";
    }
    if (capped && !r.stacks.threads.empty())
      r.stacks.threads.back().note += (r.stacks.threads.back().note.empty() ? "" : "; ") +
                                      std::string("threads cut at ") + std::to_string(lim_.threads);
  }

  // Why the memory read does not fit the layout, or "" when it does. A layout that is
  // wrong for the process fails these checks on every thread and nearly every frame; a
  // right one fails them only where memory changed under the reader.
  std::string layout_misfit() const {
    const std::string what = "the memory of CPython " + version_text(l_.version) + " does not fit " + l_.method + ": ";
    const std::string fix = " (a patched or differently built CPython, or not CPython's memory); install py-spy";
    if (bad_threads_ > 0 && good_threads_ == 0)
      return what + "no thread state points back at its interpreter" + fix;
    if (bad_codes_ > good_codes_)
      return what + std::to_string(bad_codes_) + " of " + std::to_string(bad_codes_ + good_codes_) +
             " frames' code objects are not code objects" + fix;
    return "";
  }

  std::string errno_text() const {
    switch (mem_.error()) {
      case ESRCH: return "the process exited while it was being read";
      case ETIMEDOUT: return "the time for reading it ran out";
      case EPERM:
      case EACCES: return "reading its memory was refused";
      default: return "its memory could not be read (" + std::string(std::strerror(mem_.error())) + ")";
    }
  }

 private:
  Bounded& mem_;
  const PyLayout& l_;
  const WalkInput& in_;
  const WalkLimits& lim_;
  std::map<std::uint64_t, CodeInfo> codes_;
  // The layout checks: thread states that do (not) point back at their interpreter,
  // frames whose code object is (not) of PyCode_Type.
  std::size_t good_threads_ = 0, bad_threads_ = 0, good_codes_ = 0, bad_codes_ = 0;
};

}  // namespace

WalkResult walk_python(MemoryReader& raw, const WalkInput& in, const WalkLimits& limits) {
  WalkResult r;
  Bounded mem(raw, in.deadline);
  auto fail = [&](const std::string& why) {
    r.stacks.why_none = "no Python frames: " + why;
    r.read_errno = mem.fatal() ? mem.error() : 0;
    return r;
  };
  std::vector<unsigned char> table;
  if (!mem.block(in.runtime, kDebugOffsetsRead, table)) {
    // The table may end near a mapping's end; its 3.13 form needs less.
    if (mem.fatal() || !mem.block(in.runtime, 16, table)) {
      Walker w(mem, PyLayout{}, in, limits);
      return fail("_PyRuntime at 0x" + [&] {
        char b[32];
        std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(in.runtime));
        return std::string(b);
      }() + " is unreadable: " + w.errno_text());
    }
  }
  LayoutResult layout;
  if (std::memcmp(table.data(), "xdebugpy", 8) == 0) {
    layout = layout_from_debug_offsets(table.data(), table.size());
  } else if (!in.file_version) {
    return fail("the exact CPython version is unknown (no debug offsets table, and the binary has no Py_Version "
                "symbol: stripped?); install py-spy");
  } else if (*in.file_version >= 0x030D0000) {
    return fail("CPython " + version_text(*in.file_version) +
                " has no debug offsets table at _PyRuntime (not CPython's runtime, or memory being changed)");
  } else {
    layout = layout_from_headers(*in.file_version);
  }
  if (!layout.layout) return fail(layout.why_not);
  r.stacks.python_version = version_text(layout.layout->version);
  r.stacks.method = layout.layout->method;
  Walker w(mem, *layout.layout, in, limits);
  w.walk(r, in.runtime);
  return r;
}

}  // namespace gpudiag::pyframes
