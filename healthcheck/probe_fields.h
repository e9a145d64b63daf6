#pragma once
// Reading fields of the GPU probe's JSON. The probe may be another version or broken,
// so a field of the wrong type reads as absent: nlohmann's own value() and get() throw
// on a type mismatch, and that would turn a bad probe answer into an internal error.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <type_traits>

namespace gpudiag {

template <class T>
std::optional<T> probe_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  const auto& v = *it;
  if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) return v.get<std::string>();
  } else {
    if (v.is_number_unsigned() || v.is_number_integer()) return v.get<T>();
  }
  return std::nullopt;
}

}  // namespace gpudiag
