#pragma once
// CPython's location table (co_linetable, 3.11 and later; Objects/locations.md in
// CPython): the source line of the instruction at a byte offset into the bytecode.
#include <cstddef>
#include <cstdint>

namespace gpudiag::pyframes {

// The line of the instruction that covers `byte_offset` (a multiple of 2: code units
// are two bytes), counting from `first_line`; 0 when the table does not say (no entry
// covers the offset, the entry has no line, or the table is cut short).
int line_for_offset(const std::uint8_t* table, std::size_t len, int first_line, std::uint64_t byte_offset);

}  // namespace gpudiag::pyframes
