#include "stacks/pyframes/python_layout.h"

#include <cstring>

namespace gpudiag::pyframes {
namespace {

constexpr std::uint64_t kAll = ~std::uint64_t{0};
// An offset larger than this into any structure the walker reads is not CPython's.
constexpr std::uint64_t kMaxStruct = 16u << 20;
constexpr std::uint64_t kMaxSmallStruct = 64u << 10;

// 3.11 layouts, from the release's internal headers (pycore_runtime.h, pycore_interp.h,
// cpython/pystate.h, pycore_frame.h, cpython/code.h, cpython/unicodeobject.h) with
// offsetof() on x86-64, and checked by reading live processes of that release
// (tests/unit/test_python_stacks.cpp). Only the versions listed here are trusted.
PyLayout layout_311_common() {
  PyLayout l{};
  l.method = "gpudiag (CPython 3.11 layout)";
  l.runtime_interpreters_head = 40;
  l.interp_next = 0;
  l.interp_threads_head = 16;
  l.gil_in_runtime = true;
  l.gil_holder = 368;  // _PyRuntime.ceval.gil.last_holder
  l.gil_locked = 376;  // _PyRuntime.ceval.gil.locked
  l.tstate_next = 8;
  l.tstate_native_thread_id = 160;
  l.tstate_frame = 56;  // cframe
  l.cframe_current_frame = 8;
  l.frame_code = 32;
  l.frame_previous = 48;
  l.frame_instr = 56;  // prev_instr
  l.frame_owner = 69;
  l.code_tag_mask = kAll;
  l.skip_owner_from = 0;
  l.skip_owner_to = -1;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_linetable = 136;
  l.code_firstlineno = 72;
  l.code_adaptive = 184;
  l.ob_type = 8;
  l.unicode_length = 16;
  l.unicode_state = 32;
  l.unicode_ascii_data = 48;    // sizeof(PyASCIIObject)
  l.unicode_compact_data = 72;  // sizeof(PyCompactUnicodeObject)
  l.bytes_size = 16;
  l.bytes_data = 32;
  return l;
}

struct Known311 {
  std::uint32_t hex;
  const char* where;
};
constexpr Known311 kKnown311[] = {
    {0x030B02F0, "Debian 12 (python3.11 3.11.2-6+deb12u6)"},
};

std::uint64_t u64(const unsigned char* p, std::size_t index) {
  std::uint64_t v;
  std::memcpy(&v, p + index * 8, 8);
  return v;
}

// Field indexes (in uint64 slots) of the parts of _Py_DebugOffsets the walker uses.
struct TableShape {
  std::size_t slots;
  std::size_t interp_size, interp_next, interp_threads_head, gil_locked, gil_holder;
  std::size_t tstate_size, tstate_next, tstate_native_thread_id, tstate_current_frame;
  std::size_t frame_size, frame_previous, frame_executable, frame_instr_ptr, frame_owner;
  std::size_t code_size, code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_adaptive;
  std::size_t ob_type;
  std::size_t bytes_size, bytes_ob_size, bytes_sval;
  std::size_t unicode_size, unicode_state, unicode_length, unicode_ascii_size;
};
// 3.13 (Include/internal/pycore_runtime.h of 3.13.5).
constexpr TableShape kShape313{73, 6, 8, 9, 17, 18, 19, 21, 25, 23, 28, 29, 30, 31, 33,
                               34, 35, 36, 37, 38, 39, 43, 45, 64, 65, 66, 67, 68, 69, 70};
// 3.14 (Include/internal/pycore_debug_offsets.h of 3.14.8): interpreter_state gained
// threads_main, code_object_generation and tlbc_generation, interpreter_frame
// stackpointer and tlbc_index, code_object co_tlbc, and a set_object block came in.
constexpr TableShape kShape314{95, 6, 8, 9, 18, 19, 22, 24, 28, 26, 31, 32, 33, 34, 36,
                               39, 40, 41, 42, 43, 44, 48, 51, 74, 75, 76, 77, 78, 79, 80};

}  // namespace

std::string version_text(std::uint32_t hex) {
  std::string s = std::to_string(hex >> 24) + "." + std::to_string((hex >> 16) & 0xff) + "." +
                  std::to_string((hex >> 8) & 0xff);
  const unsigned level = (hex >> 4) & 0xf;
  const char* tag = level == 0xA ? "a" : level == 0xB ? "b" : level == 0xC ? "rc" : nullptr;
  if (tag) s += tag + std::to_string(hex & 0xf);
  return s;
}

LayoutResult layout_311(std::uint32_t version_hex) {
  for (const Known311& k : kKnown311) {
    if (k.hex != version_hex) continue;
    PyLayout l = layout_311_common();
    l.version = version_hex;
    return {l, ""};
  }
  std::string known;
  for (const Known311& k : kKnown311) known += (known.empty() ? "" : ", ") + version_text(k.hex) + " (" + k.where + ")";
  return {std::nullopt, "CPython " + version_text(version_hex) +
                            " has no debug offsets table and its layout was not checked by this gpudiag (3.11 layouts "
                            "known: " + known + "); install py-spy, or add the version to stacks/pyframes/python_layout.cpp "
                            "after checking its offsets"};
}

LayoutResult layout_from_debug_offsets(const unsigned char* t, std::size_t len) {
  if (len < 3 * 8 || std::memcmp(t, "xdebugpy", 8) != 0) return {std::nullopt, "no debug offsets table (cookie xdebugpy)"};
  const std::uint64_t version = u64(t, 1);
  const unsigned major = (version >> 24) & 0xff, minor = (version >> 16) & 0xff;
  const std::string vtext = version_text(static_cast<std::uint32_t>(version));
  if (version >> 32 || major != 3) return {std::nullopt, "the debug offsets table states no CPython 3 version"};
  if (u64(t, 2) != 0)
    return {std::nullopt, "CPython " + vtext + " is a free-threaded build, whose frames this gpudiag does not read; "
                          "install py-spy"};
  const TableShape* shape = minor == 13 ? &kShape313 : minor == 14 ? &kShape314 : nullptr;
  if (!shape)
    return {std::nullopt, "CPython " + vtext + "'s debug offsets table is in a form this gpudiag does not know "
                          "(known: 3.13, 3.14); install py-spy"};
  if (len < shape->slots * 8) return {std::nullopt, "the debug offsets table is cut short"};
  auto at = [&](std::size_t i) { return u64(t, i); };
  // Each offset must fall inside the structure size the table states.
  auto inside = [&](std::size_t size_slot, std::initializer_list<std::size_t> fields, std::uint64_t max_size) {
    const std::uint64_t size = at(size_slot);
    if (size == 0 || size > max_size) return false;
    for (std::size_t f : fields)
      if (at(f) + 8 > size) return false;
    return true;
  };
  const TableShape& s = *shape;
  if (!inside(s.interp_size, {s.interp_next, s.interp_threads_head, s.gil_locked, s.gil_holder}, kMaxStruct) ||
      !inside(s.tstate_size, {s.tstate_next, s.tstate_native_thread_id, s.tstate_current_frame}, kMaxSmallStruct) ||
      !inside(s.frame_size, {s.frame_previous, s.frame_executable, s.frame_instr_ptr}, kMaxSmallStruct) ||
      at(s.frame_owner) >= at(s.frame_size) ||
      !inside(s.code_size, {s.code_filename, s.code_name, s.code_qualname, s.code_linetable}, kMaxSmallStruct) ||
      at(s.code_firstlineno) + 4 > at(s.code_size) || at(s.code_adaptive) > at(s.code_size) ||
      at(s.ob_type) > 64 || !inside(s.bytes_size, {s.bytes_ob_size}, kMaxSmallStruct) ||
      at(s.bytes_sval) > at(s.bytes_size) || !inside(s.unicode_size, {s.unicode_length}, kMaxSmallStruct) ||
      at(s.unicode_state) + 4 > at(s.unicode_size) || at(s.unicode_ascii_size) > at(s.unicode_size) ||
      at(5) > kMaxStruct)
    return {std::nullopt, "CPython " + vtext + "'s debug offsets table holds offsets outside its own structures"};

  PyLayout l{};
  l.method = "gpudiag (CPython " + std::to_string(major) + "." + std::to_string(minor) + " debug offsets)";
  l.version = static_cast<std::uint32_t>(version);
  l.runtime_interpreters_head = at(5);
  l.interp_next = at(s.interp_next);
  l.interp_threads_head = at(s.interp_threads_head);
  l.gil_in_runtime = false;
  l.gil_locked = at(s.gil_locked);
  l.gil_holder = at(s.gil_holder);
  l.tstate_next = at(s.tstate_next);
  l.tstate_native_thread_id = at(s.tstate_native_thread_id);
  l.tstate_frame = at(s.tstate_current_frame);
  l.frame_previous = at(s.frame_previous);
  l.frame_code = at(s.frame_executable);
  l.frame_instr = at(s.frame_instr_ptr);
  l.frame_owner = at(s.frame_owner);
  // 3.13: FRAME_OWNED_BY_CSTACK = 3. 3.14: FRAME_OWNED_BY_INTERPRETER = 3 and
  // FRAME_OWNED_BY_CSTACK = 4 (pycore_interpframe_structs.h), and f_executable is a
  // _PyStackRef whose low bit tags a deferred reference (Py_TAG_BITS).
  l.skip_owner_from = 3;
  l.skip_owner_to = minor == 13 ? 3 : 4;
  l.code_tag_mask = minor == 13 ? kAll : ~std::uint64_t{7};
  l.code_filename = at(s.code_filename);
  l.code_name = at(s.code_name);
  l.code_qualname = at(s.code_qualname);
  l.code_linetable = at(s.code_linetable);
  l.code_firstlineno = at(s.code_firstlineno);
  l.code_adaptive = at(s.code_adaptive);
  l.ob_type = at(s.ob_type);
  l.unicode_state = at(s.unicode_state);
  l.unicode_length = at(s.unicode_length);
  l.unicode_ascii_data = at(s.unicode_ascii_size);
  l.unicode_compact_data = at(s.unicode_ascii_size) + 16;  // + utf8_length, utf8 (3.12 and later)
  l.bytes_size = at(s.bytes_ob_size);
  l.bytes_data = at(s.bytes_sval);
  return {l, ""};
}

}  // namespace gpudiag::pyframes
