#include "util/step_token.h"

#include <sys/random.h>

#include <algorithm>

namespace gpudiag {

std::optional<std::string> new_step_token() {
  unsigned char raw[kStepTokenHex / 2];
  if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) return std::nullopt;
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : raw) {
    t += hex[c >> 4];
    t += hex[c & 15];
  }
  return t;
}

bool is_step_token(const std::string& s) {
  return s.size() == kStepTokenHex &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;  // no early exit: the time says nothing about the token
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace gpudiag
