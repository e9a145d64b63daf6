#include "spank/plan/port_salt.h"

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

namespace {

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t permute_port_index(std::uint64_t index, std::uint64_t span, std::uint64_t salt) {
  if (span <= 1) return 0;
  unsigned half = 1;
  while ((1ull << (2 * half)) < span) ++half;
  const std::uint64_t mask = (1ull << half) - 1;
  constexpr int kRounds = 6;
  std::uint64_t keys[kRounds];
  for (int i = 0; i < kRounds; ++i) keys[i] = mix(salt + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1));
  std::uint64_t x = index % span;
  do {
    std::uint64_t left = x >> half, right = x & mask;
    for (std::uint64_t k : keys) {
      const std::uint64_t next = left ^ (mix(right ^ k) & mask);
      left = right;
      right = next;
    }
    x = left << half | right;
  } while (x >= span);  // the cycle through index leads back inside within 4 * span steps
  return x;
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
