#include "nodeinfo/sysfs_text.h"

#include <charconv>

#include "util/control_bytes.h"

namespace gpudiag {

Result<std::string> attribute_text(std::string_view raw, std::string_view where, std::size_t max_len) {
  const std::string w(where);
  while (!raw.empty() && (raw.back() == '\n' || raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r'))
    raw.remove_suffix(1);
  if (raw.empty()) return Result<std::string>::failure(w + ": file is empty");
  for (unsigned char c : raw) {
    if ((is_control_byte(c) && c != '\t') || c >= 0x80)
      return Result<std::string>::failure(w + ": holds binary data, not text");
  }
  if (raw.size() > max_len)
    return Result<std::string>::failure(w + ": value is " + std::to_string(raw.size()) +
                                        " characters long, more than a sysfs attribute holds");
  return std::string(raw);
}

Result<std::uint64_t> parse_hex_attr(std::string_view raw, std::string_view where) {
  auto text = attribute_text(raw, where, 32);
  if (!text) return Result<std::uint64_t>::failure(text.error());
  std::string_view s = *text;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    return Result<std::uint64_t>::failure(std::string(where) + ": expected a hex number, found '" + *text + "'");
  return v;
}

Result<long> parse_int_attr(std::string_view raw, std::string_view where) {
  auto text = attribute_text(raw, where, 32);
  if (!text) return Result<long>::failure(text.error());
  std::string_view s = *text;
  long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc() || end != s.data() + s.size())
    return Result<long>::failure(std::string(where) + ": expected an integer, found '" + *text + "'");
  return v;
}

}  // namespace gpudiag
