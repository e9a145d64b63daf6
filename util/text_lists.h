#pragma once
// Small text rules used all over: comma lists in, lists in messages out, the first line
// of a tool's output for a one-line message.
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

// "a,,b," -> {"a", "b"}: empty items are dropped (a trailing comma is no item).
std::vector<std::string> split_list(std::string_view text, char sep = ',');

// {"a", "b", "c"} -> "a, b, c".
std::string join(const std::vector<std::string>& items, const char* sep = ", ");

// The first line of a tool's output, trailing blanks and CR removed, cut at 300 bytes:
// for messages that quote what scontrol or the probe said.
std::string first_line(std::string_view text);

// The last line that is not blank, cut the same way: what a killed program said last.
std::string last_line(std::string_view text);

}  // namespace gpudiag
