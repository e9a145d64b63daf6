#pragma once
// A bounded reader for the subset of Python's pickle format that torch's flight recorder
// writes (issue 31.4): torch::jit::Pickler at protocol 2 over dicts, lists, tuples,
// strings, ints, floats, bools and None (torch/csrc/distributed/c10d/FlightRecorder*.cpp,
// pickle_str()), with memo puts and gets. Nothing is ever imported or called: a GLOBAL
// followed by REDUCE (torch's build_intlist and kin) yields its argument. The bytes come
// from a file in the diag dir, so they are untrusted: every length is checked against
// what is left, nesting and the number of values are capped, and anything outside the
// subset is an error, never a guess.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

struct PickleValue {
  enum class Kind { none, boolean, integer, real, text, list, tuple, dict, global, mark };
  Kind kind = Kind::none;
  std::int64_t i = 0;  // boolean and integer
  double d = 0;
  std::string s;       // text; global: "module.name"
  std::vector<PickleValue> items;                          // list, tuple
  std::vector<PickleValue> keys, values;  // dict, in order (vector, not pair: PickleValue is incomplete here)

  // The dict's value under a text key, or nullptr.
  const PickleValue* get(std::string_view key) const;
};

constexpr std::size_t kMaxPickleValues = 1u << 20;  // values created, copies from the memo included
constexpr std::size_t kMaxPickleDepth = 64;

struct PickleResult {
  bool ok = false;
  PickleValue value;
  std::string why;  // !ok: what was wrong, with the offset
};

PickleResult read_pickle(std::string_view bytes);

}  // namespace gpudiag
