#pragma once
// Durations as people write them: "90" or "90s", "10m", "1h", "1.5m". Shared by the
// config and srun --diag=hang=DURATION so both accept the same text. Sizes the same way.
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag {

// Seconds, or nullopt for anything else (negative, empty, unknown unit, trailing junk).
std::optional<double> parse_duration(std::string_view text);

// Byte sizes: "64M", "1G", "1GiB", "512MiB", "1048576". Powers of 1024.
std::optional<unsigned long long> parse_size(std::string_view text);
// Sizes for messages, exact, in the largest unit that divides them: "1 GiB", "8 MiB",
// "1536 B". Never rounded: a limit 1 byte short of 1 GiB must not print as 1 GiB.
std::string size_text(unsigned long long bytes);

}  // namespace gpudiag
