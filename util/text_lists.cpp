#include "util/text_lists.h"

namespace gpudiag {

std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto at = text.find(sep, start);
    auto item = text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start);
    if (!item.empty()) out.emplace_back(item);
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string first_line(std::string_view text) {
  std::string line(text.substr(0, text.find('\n')));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  std::size_t nl = text.rfind('\n');
  return first_line(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

}  // namespace gpudiag
