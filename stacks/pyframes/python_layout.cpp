#include "stacks/pyframes/python_layout.h"

#include <cstring>

namespace gpudiag::pyframes {
namespace {

constexpr std::uint64_t kAll = ~std::uint64_t{0};
// An offset larger than this into any structure the walker reads is not CPython's.
constexpr std::uint64_t kMaxStruct = 16u << 20;
constexpr std::uint64_t kMaxSmallStruct = 64u << 10;

// Layouts of the versions without a debug offsets table, derived by hand from each
// release's headers for x86-64 (8-byte pointers, longs and size_t; 4-byte ints; every
// field at its own alignment) and confirmed with offsetof() on the headers of 3.11.2
// (Debian 12), 3.11.7, 3.12.1 and 3.12.10, and by reading live processes of 3.11.2,
// 3.11.7, 3.12.1 and 3.12.10 (tests/unit/stacks/pyframes/test_python_stacks.cpp). Those headers are
// identical within each minor version in every structure below, and CPython keeps
// internal structures fixed within a minor release; the walk's checks
// (frame_walker.cpp) refuse a process whose memory does not fit anyway.
//
// 3.11 (Include/internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h,
// cpython/pystate.h, cpython/code.h, cpython/unicodeobject.h, cpython/bytesobject.h):
PyLayout layout_311() {
  PyLayout l{};
  l.method = "gpudiag (CPython 3.11 layout)";
  // _PyRuntimeState: 5 ints _initialized..initialized (0-19), pad, _finalizing 24,
  // interpreters {mutex 32, head 40, main 48, next_id 56}, xidregistry {mutex 64, head 72},
  // main_thread 80, exitfuncs[32] 88-343, nexitfuncs 344, pad, ceval at 352:
  // {signals_pending 352, pad, gil {interval 360, last_holder 368, locked 376}}.
  l.runtime_interpreters_head = 40;
  l.gil_in_runtime = true;
  l.gil_holder = 368;
  l.gil_locked = 376;
  // PyInterpreterState: next 0, threads {next_unique_id 8, head 16}.
  l.interp_next = 0;
  l.interp_threads_head = 16;
  // PyThreadState: prev 0, next 8, interp 16, 7 ints _initialized.._tracing_what
  // (24-51), pad, cframe 56, c_profilefunc 64, c_tracefunc 72, c_profileobj 80,
  // c_traceobj 88, curexc_type/value/traceback 96-119, exc_info 120, dict 128,
  // gilstate_counter 136, pad, async_exc 144, thread_id 152, native_thread_id 160.
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_frame = 56;
  l.tstate_native_thread_id = 160;
  // _PyCFrame: use_tracing (uint8_t) 0, pad, current_frame 8.
  l.cframe_current_frame = 8;
  // _PyInterpreterFrame: f_func 0, f_globals 8, f_builtins 16, f_locals 24, f_code 32,
  // frame_obj 40, previous 48, prev_instr 56, stacktop 64, is_entry 68, owner 69.
  // 3.11 has no shim frames of its own (is_entry marks the C entry instead).
  l.frame_code = 32;
  l.frame_previous = 48;
  l.frame_instr = 56;
  l.frame_owner = 69;
  l.skip_owner_from = 0;
  l.skip_owner_to = -1;
  // PyCodeObject: PyObject_VAR_HEAD 0-23, co_consts 24, co_names 32,
  // co_exceptiontable 40, co_flags 48, co_warmup 52 (short),
  // _co_linearray_entry_size 54 (short), 5 ints co_argcount..co_stacksize 56-71,
  // co_firstlineno 72, 5 ints co_nlocalsplus..co_nfreevars 76-95, co_localsplusnames 96,
  // co_localspluskinds 104, co_filename 112, co_name 120, co_qualname 128,
  // co_linetable 136, co_weakreflist 144, _co_code 152, _co_linearray 160,
  // _co_firsttraceable 168, pad, co_extra 176, co_code_adaptive 184.
  l.code_firstlineno = 72;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_linetable = 136;
  l.code_adaptive = 184;
  // PyASCIIObject: ob_refcnt 0, ob_type 8, length 16, hash 24, state 32, pad, wstr 40:
  // 48 bytes; PyCompactUnicodeObject adds utf8_length 48, utf8 56, wstr_length 64: 72.
  l.unicode_length = 16;
  l.unicode_state = 32;
  l.unicode_ascii_data = 48;
  l.unicode_compact_data = 72;
  return l;
}

// 3.12 (the same headers; the GIL moved into the interpreter, _PyInterpreterFrame and
// PyThreadState were reordered, wstr left str):
PyLayout layout_312() {
  PyLayout l{};
  l.method = "gpudiag (CPython 3.12 layout)";
  // _PyRuntimeState: 5 ints _initialized..initialized (0-19), pad, _finalizing 24,
  // interpreters {mutex 32, head 40}.
  l.runtime_interpreters_head = 40;
  // PyInterpreterState: next 0, id 8, id_refcount 16, requires_idref 24, pad,
  // id_mutex 32, _initialized 40, finalizing 44, monitoring_version 48,
  // last_restart_version 56, threads {next_unique_id 64, head 72, count 80,
  // stacksize 88}, runtime 96, _finalizing 104,
  l.interp_next = 0;
  l.interp_threads_head = 72;
  // gc (struct _gc_runtime_state, 240 bytes: trash_delete_later 0, 3 ints 8-19, pad,
  // generations[3] of 24 bytes 24-95, generation0 96, permanent_generation 104-127,
  // generation_stats[3] of 24 bytes 128-199, collecting 200, pad, garbage 208,
  // callbacks 216, long_lived_total 224, long_lived_pending 232) 112-351, sysdict 352,
  // builtins 360, ceval (struct _ceval_state, 576 bytes: eval_breaker 0,
  // gil_drop_request 4, recursion_limit 8, pad, gil 16, own_gil 24, gc_scheduled 28,
  // pending {busy 32, pad, lock 40, calls_to_do 48, async_exc 52, calls[32] of 16 bytes
  // 56-567, first 568, last 572}) 368-943, imports (struct _import_state, 96 bytes:
  // modules 0, modules_by_index 8, importlib 16, override_frozen_modules 24,
  // override_multi_interp_extensions_check 28, dlopenflags 32, pad, import_func 40,
  // lock {mutex 48, thread 56, level 64}, pad, find_and_load {import_level 72, pad,
  // accumulated 80, header 88}, pad) 944-1039, _gil at 1040: {interval 1040,
  // last_holder 1048, locked 1056}. The main interpreter's ceval.gil points at its own
  // _gil.
  l.gil_in_runtime = false;
  l.gil_holder = 1048;
  l.gil_locked = 1056;
  // PyThreadState: prev 0, next 8, interp 16, _status (bit fields in 4 bytes) 24,
  // 6 ints py_recursion_remaining..what_event 28-51, pad, cframe 56, c_profilefunc 64,
  // c_tracefunc 72, c_profileobj 80, c_traceobj 88, current_exception 96, exc_info 104,
  // dict 112, gilstate_counter 120, pad, async_exc 128, thread_id 136,
  // native_thread_id 144.
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_frame = 56;
  l.tstate_native_thread_id = 144;
  // _PyCFrame: current_frame 0, previous 8 (use_tracing is gone).
  l.cframe_current_frame = 0;
  // _PyInterpreterFrame: f_code 0, previous 8, f_funcobj 16, f_globals 24,
  // f_builtins 32, f_locals 40, frame_obj 48, prev_instr 56, stacktop 64,
  // return_offset 68 (uint16_t), owner 70. FRAME_OWNED_BY_CSTACK (3) marks the shim
  // frame _PyEval_EvalFrameDefault pushes on entry (its code is the interpreter's
  // trampoline, not the program's).
  l.frame_code = 0;
  l.frame_previous = 8;
  l.frame_instr = 56;
  l.frame_owner = 70;
  l.skip_owner_from = 3;
  l.skip_owner_to = 3;
  // PyCodeObject: PyObject_VAR_HEAD 0-23, co_consts 24, co_names 32,
  // co_exceptiontable 40, co_flags 48, 4 ints co_argcount..co_stacksize 52-67,
  // co_firstlineno 68, 5 ints co_nlocalsplus..co_nfreevars 72-91, co_version 92,
  // co_localsplusnames 96, co_localspluskinds 104, co_filename 112, co_name 120,
  // co_qualname 128, co_linetable 136, co_weakreflist 144, _co_cached 152,
  // _co_instrumentation_version 160, _co_monitoring 168, _co_firsttraceable 176, pad,
  // co_extra 184, co_code_adaptive 192.
  l.code_firstlineno = 68;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_linetable = 136;
  l.code_adaptive = 192;
  // PyASCIIObject: ob_refcnt 0, ob_type 8, length 16, hash 24, state 32, pad: 40 bytes;
  // PyCompactUnicodeObject adds utf8_length 40, utf8 48: 56.
  l.unicode_length = 16;
  l.unicode_state = 32;
  l.unicode_ascii_data = 40;
  l.unicode_compact_data = 56;
  return l;
}

std::uint64_t u64(const unsigned char* p, std::size_t index) {
  std::uint64_t v;
  std::memcpy(&v, p + index * 8, 8);
  return v;
}

// Field indexes (in uint64 slots) of the parts of _Py_DebugOffsets the walker uses.
struct TableShape {
  std::size_t slots;
  std::size_t interp_size, interp_next, interp_threads_head, gil_locked, gil_holder;
  std::size_t tstate_size, tstate_next, tstate_interp, tstate_native_thread_id, tstate_current_frame;
  std::size_t frame_size, frame_previous, frame_executable, frame_instr_ptr, frame_owner;
  std::size_t code_size, code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_adaptive;
  std::size_t ob_type;
  std::size_t bytes_size, bytes_ob_size, bytes_sval;
  std::size_t unicode_size, unicode_state, unicode_length, unicode_ascii_size;
};
// 3.13 (Include/internal/pycore_runtime.h of 3.13.5).
constexpr TableShape kShape313{73, 6, 8, 9, 17, 18, 19, 21, 22, 25, 23, 28, 29, 30, 31, 33,
                               34, 35, 36, 37, 38, 39, 43, 45, 64, 65, 66, 67, 68, 69, 70};
// 3.14 (Include/internal/pycore_debug_offsets.h of 3.14.8): interpreter_state gained
// threads_main, code_object_generation and tlbc_generation, interpreter_frame
// stackpointer and tlbc_index, code_object co_tlbc, and a set_object block came in.
constexpr TableShape kShape314{95, 6, 8, 9, 18, 19, 22, 24, 25, 28, 26, 31, 32, 33, 34, 36,
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

LayoutResult layout_from_headers(std::uint32_t version_hex) {
  const std::string v = version_text(version_hex);
  const unsigned major = version_hex >> 24, minor = (version_hex >> 16) & 0xff, micro = (version_hex >> 8) & 0xff;
  const unsigned level = (version_hex >> 4) & 0xf;
  if (major != 3 || (minor != 11 && minor != 12))
    return {std::nullopt, "CPython " + v + " is not supported by gpudiag's reader (3.11 to 3.14 are); install py-spy"};
  // An x.y.0 alpha, beta or release candidate may still have had other structures.
  if (micro == 0 && level != 0xF)
    return {std::nullopt, "CPython " + v + " is a pre-release, whose layout may differ from " + std::to_string(major) +
                              "." + std::to_string(minor) + ".0's; install py-spy"};
  PyLayout l = minor == 11 ? layout_311() : layout_312();
  l.version = version_hex;
  // Alike in both: PyObject's ob_type, PyBytesObject (PyObject_VAR_HEAD with ob_size 16,
  // ob_shash 24, ob_sval 32).
  l.code_tag_mask = kAll;
  l.ob_type = 8;
  l.bytes_size = 16;
  l.bytes_data = 32;
  return {l, ""};
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
      !inside(s.tstate_size, {s.tstate_next, s.tstate_interp, s.tstate_native_thread_id, s.tstate_current_frame},
              kMaxSmallStruct) ||
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
  l.tstate_interp = at(s.tstate_interp);
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
