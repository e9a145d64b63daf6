#pragma once
// Pure parsers for the small text attributes the kernel exposes in sysfs and procfs.
// Each takes the file's raw bytes and the kernel path (for the message), so garbage
// becomes an error that names the file.
#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

// The attribute with its trailing newline/whitespace removed. Empty files, binary
// bytes and overlong values are errors.
Result<std::string> attribute_text(std::string_view raw, std::string_view where,
                                   std::size_t max_len = 256);
// "0x10de" or "10de".
Result<std::uint64_t> parse_hex_attr(std::string_view raw, std::string_view where);
// A decimal integer such as a numa_node ("-1" allowed).
Result<long> parse_int_attr(std::string_view raw, std::string_view where);

}  // namespace gpudiag
