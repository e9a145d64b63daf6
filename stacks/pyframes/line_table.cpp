#include "stacks/pyframes/line_table.h"

namespace gpudiag::pyframes {
namespace {

// Entry codes (the bits 3-6 of an entry's first byte).
constexpr int kNoLocation = 15;
constexpr int kLong = 14;
constexpr int kNoColumns = 13;
constexpr int kOneLine0 = 10;

// 6 bits per byte, 0x40 says another byte follows. Capped: a table from another
// process may hold anything.
bool read_varint(const std::uint8_t* t, std::size_t len, std::size_t& i, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 36; shift += 6) {
    if (i >= len) return false;
    std::uint8_t b = t[i++];
    v |= static_cast<std::uint64_t>(b & 63) << shift;
    if (!(b & 64)) return true;
  }
  return false;
}

bool read_svarint(const std::uint8_t* t, std::size_t len, std::size_t& i, std::int64_t& v) {
  std::uint64_t u;
  if (!read_varint(t, len, i, u)) return false;
  v = (u & 1) ? -static_cast<std::int64_t>(u >> 1) : static_cast<std::int64_t>(u >> 1);
  return true;
}

}  // namespace

int line_for_offset(const std::uint8_t* table, std::size_t len, int first_line, std::uint64_t byte_offset) {
  std::int64_t line = first_line;
  std::uint64_t start = 0;
  std::size_t i = 0;
  while (i < len) {
    const std::uint8_t head = table[i];
    if (!(head & 128)) return 0;  // not at an entry's start: a corrupt table
    const int code = (head >> 3) & 15;
    const std::uint64_t end = start + 2 * ((head & 7) + 1);
    ++i;
    std::int64_t delta = 0;
    if (code == kLong || code == kNoColumns) {
      if (!read_svarint(table, len, i, delta)) return 0;
    } else if (code >= kOneLine0 && code < kNoColumns) {
      delta = code - kOneLine0;
    }
    line += delta;
    if (line < -(1LL << 31) || line > (1LL << 31)) return 0;
    if (byte_offset >= start && byte_offset < end)
      return code == kNoLocation || line <= 0 || line > 0x7fffffff ? 0 : static_cast<int>(line);
    // Skip the rest of the entry: every byte up to the next one with bit 7 set.
    while (i < len && !(table[i] & 128)) ++i;
    start = end;
  }
  return 0;
}

}  // namespace gpudiag::pyframes
