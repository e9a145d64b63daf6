#pragma once
// Where CPython keeps what the walker follows, per version. 3.13 and later say it
// themselves: `_Py_DebugOffsets` opens `_PyRuntime` (cookie "xdebugpy", then the
// version, then offsets); its own shape differs between 3.13 and 3.14, so the table is
// read by the version it states. 3.11 and 3.12 have no such table: their offsets come
// from their internal headers, one layout per minor version (the releases' headers compared
// agree; python_layout.cpp says which), trusted for final releases only; the walk then
// checks what it reads against them (thread states point back at their interpreter, code
// objects have PyCode_Type) and refuses memory that does not fit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag::pyframes {

struct PyLayout {
  std::string method;     // "gpudiag (CPython 3.12 layout)", "gpudiag (CPython 3.13 debug offsets)"
  std::uint32_t version;  // PY_VERSION_HEX
  // _PyRuntimeState
  std::uint64_t runtime_interpreters_head;
  // PyInterpreterState
  std::uint64_t interp_next, interp_threads_head;
  // The GIL: in _PyRuntime (3.11) or in each PyInterpreterState (3.12+).
  bool gil_in_runtime;
  std::uint64_t gil_locked, gil_holder;
  // PyThreadState; the frame is at tstate->cframe->current_frame when cframe_current_frame
  // is set (3.11/3.12), else at tstate->current_frame. tstate->interp points back at the
  // interpreter whose list holds it: the walk's check that the layout fits.
  std::uint64_t tstate_next, tstate_interp, tstate_native_thread_id, tstate_frame;
  std::optional<std::uint64_t> cframe_current_frame;
  // _PyInterpreterFrame
  std::uint64_t frame_previous, frame_code, frame_instr, frame_owner;
  std::uint64_t code_tag_mask;  // 3.14: f_executable is a _PyStackRef, its low bits a tag
  int skip_owner_from;          // frames with owner >= this are the interpreter's own, not code (0: none)
  int skip_owner_to;            // ... and <= this
  // PyCodeObject
  std::uint64_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_adaptive;
  // PyObject, str, bytes
  std::uint64_t ob_type;
  std::uint64_t unicode_state, unicode_length, unicode_ascii_data, unicode_compact_data;
  std::uint64_t bytes_size, bytes_data;
};

// "3.11.2", "3.14.0rc1"
std::string version_text(std::uint32_t hex);

struct LayoutResult {
  std::optional<PyLayout> layout;
  std::string why_not;
};
// The layout of a CPython without a debug offsets table (3.11.x, 3.12.x final releases),
// from its headers; else the reason.
LayoutResult layout_from_headers(std::uint32_t version_hex);

// Bytes of _Py_DebugOffsets needed to read a table of any version known here.
constexpr std::size_t kDebugOffsetsRead = 1024;
// The layout a `_Py_DebugOffsets` table (starting with "xdebugpy") describes.
LayoutResult layout_from_debug_offsets(const unsigned char* table, std::size_t len);

}  // namespace gpudiag::pyframes
