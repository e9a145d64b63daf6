#include "util/control_bytes.h"

namespace gpudiag {

bool is_control_byte(unsigned char c) { return c < 0x20 || c == 0x7f; }

namespace {
// Whether the byte at i continues a UTF-8 sequence that starts before it: a lead byte at
// most 3 back whose length reaches i, with only continuation bytes between.
bool continues_utf8(std::string_view s, std::size_t i) {
  for (std::size_t back = 1; back <= 3 && back <= i; ++back) {
    const auto b = static_cast<unsigned char>(s[i - back]);
    if ((b & 0xc0) == 0x80) continue;
    const std::size_t len = (b >= 0xc2 && b <= 0xdf) ? 2 : (b >= 0xe0 && b <= 0xef) ? 3 : (b >= 0xf0 && b <= 0xf4) ? 4 : 0;
    return len > back;
  }
  return false;
}
}  // namespace

std::size_t control_length(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  const auto c = static_cast<unsigned char>(s[i]);
  if (is_control_byte(c)) return 1;
  if (c == 0xc2 && i + 1 < s.size()) {
    const auto n = static_cast<unsigned char>(s[i + 1]);
    if (n >= 0x80 && n <= 0x9f) return 2;
  }
  // A lone 0x80-0x9f byte is C1 itself on a terminal in 8-bit mode (0x9b CSI, 0x9d OSC:
  // the Linux console, xterm without UTF-8). Inside a UTF-8 character it is text.
  if (c >= 0x80 && c <= 0x9f && !continues_utf8(s, i)) return 1;
  return 0;
}

bool is_one_printable_line(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (control_length(s, i) > 0) return false;
  return true;
}

std::string escape_control(std::string_view s, bool keep_lines) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = control_length(s, i);
    if (n == 0 || (keep_lines && (c == '\n' || c == '\t'))) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    for (; n > 0; --n, ++i) {
      const auto b = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

std::string escape_control_in_json(std::string_view json) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size();) {
    const std::size_t n = control_length(json, i);
    const auto c = static_cast<unsigned char>(json[i]);
    if (n == 0 || (n == 1 && c < 0x20)) {  // text, or the serializer's own whitespace
      out += json[i++];
      continue;
    }
    // U+00XX: DEL, C1's second byte, or a lone 8-bit C1 byte (read as Latin-1).
    const auto code = static_cast<unsigned char>(json[i + n - 1]);
    out += "\\u00";
    out += kHex[code >> 4];
    out += kHex[code & 15];
    i += n;
  }
  return out;
}

std::string replace_control(std::string_view s, char with) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = control_length(s, i);
    if (n == 0) {
      out += s[i++];
    } else {
      out += with;
      i += n;
    }
  }
  return out;
}

}  // namespace gpudiag
