#pragma once
// The one rule for bytes that must never reach a terminal, a log line or an environment
// value unescaped (issue 20): C0 controls (0x00-0x1f, newline and tab included), DEL,
// C1 controls written in UTF-8 (U+0080-U+009F, \xc2\x80-\xc2\x9f: \xc2\x9b is CSI
// on many terminals), and a lone byte 0x80-0x9f that continues no UTF-8 character (CSI
// and OSC to a terminal in 8-bit mode). Everything that checks or escapes control bytes uses this file,
// so a check and the escaping of what it let through can never disagree.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpudiag {

// C0 or DEL: a control byte whatever the encoding around it.
bool is_control_byte(unsigned char c);

// How many bytes of `s` at `i` form one control character: 1 (C0, DEL, a lone 8-bit
// C1 byte), 2 (a C1 control in UTF-8), or 0 (none).
std::size_t control_length(std::string_view s, std::size_t i);

// True when `s` holds no control character at all (so also no newline).
bool is_one_printable_line(std::string_view s);

// Each control byte as \xHH. keep_lines: newline and tab stay (multi-line reports).
std::string escape_control(std::string_view s, bool keep_lines = false);

// JSON text as a serializer wrote it (C0 inside strings already \uXXXX), with DEL and
// each C1 control as \u007f and \u0080-\u009f: valid JSON that means the same, and
// never drives a terminal. Outside strings JSON has only ASCII, and its whitespace
// (newline, tab) stays as it is.
std::string escape_control_in_json(std::string_view json);

// Each control character replaced by `with` (one per character): for a text that must
// stay one readable line, such as a Slurm drain reason.
std::string replace_control(std::string_view s, char with);

}  // namespace gpudiag
