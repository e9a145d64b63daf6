#include "spank/port_salt.h"

#include <sys/random.h>

#include <cstdio>

namespace gpudiag {

std::uint64_t parse_port_salt(const std::optional<std::string>& value) {
  if (!value || value->size() != 16) return 0;
  std::uint64_t salt = 0;
  for (char c : *value) {
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else return 0;
    salt = salt << 4 | static_cast<std::uint64_t>(digit);
  }
  return salt;
}

std::optional<std::string> new_port_salt() {
  std::uint64_t bits = 0;
  // GRND_NONBLOCK: at boot, before the pool is ready, no salt beats a blocked srun.
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) return std::nullopt;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return std::string(text);
}

}  // namespace gpudiag
