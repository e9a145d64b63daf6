#pragma once
// The config file's YAML document as the config reader sees it: null, scalars, lists and
// mappings, each with its line. yaml-cpp makes it from the text (config/yaml_tree.*, the
// one file that includes yaml-cpp); it also goes to and from bytes, so that the plugin can
// keep one parse per change of the file in a root-only cache (config/config_cache.*) and
// never load yaml-cpp, or the C++ runtime it needs, into srun and every slurmstepd for a
// file that did not change (issue 34, docs/BENCHMARKS.md "A launch as cheap as pyxis").
//
// The tree holds the document, not its meaning: what each key means is read from it by
// config.cpp each time, so a cache made by an older gpudiag is read by today's rules.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag {

class ConfigNode {
 public:
  enum class Kind : std::uint8_t { undefined = 0, null = 1, scalar = 2, sequence = 3, map = 4 };

  ConfigNode() = default;
  static ConfigNode make(Kind kind, int line, std::string text = {});

  // yaml-cpp's names, so that config.cpp reads as it did on yaml-cpp's nodes.
  bool IsDefined() const { return kind_ != Kind::undefined; }
  bool IsNull() const { return kind_ == Kind::null; }
  bool IsScalar() const { return kind_ == Kind::scalar; }
  bool IsSequence() const { return kind_ == Kind::sequence; }
  bool IsMap() const { return kind_ == Kind::map; }
  explicit operator bool() const { return IsDefined(); }
  // A scalar's text; "" for anything else (as yaml-cpp).
  const std::string& Scalar() const { return text_; }
  // 0-based as yaml-cpp's Mark().line; -1: unknown.
  int line() const { return line_; }
  Kind kind() const { return kind_; }
  // Items of a list, or entries of a mapping.
  std::size_t size() const;

  // A list's items (empty for anything else).
  const std::vector<ConfigNode>& items() const { return items_; }
  // A mapping's entries in file order (empty for anything else): key, value.
  const std::vector<std::pair<ConfigNode, ConfigNode>>& entries() const { return entries_; }
  // The first value whose key is the scalar `key`; undefined when none (or not a mapping).
  const ConfigNode& operator[](std::string_view key) const;
  // A list's item `i`; undefined when out of range (or not a list).
  const ConfigNode& operator[](std::size_t i) const;

  void add_item(ConfigNode n) { items_.push_back(std::move(n)); }
  void add_entry(ConfigNode k, ConfigNode v) { entries_.emplace_back(std::move(k), std::move(v)); }

  bool operator==(const ConfigNode& o) const;

 private:
  Kind kind_ = Kind::undefined;
  int line_ = -1;
  std::string text_;
  std::vector<ConfigNode> items_;
  std::vector<std::pair<ConfigNode, ConfigNode>> entries_;
};

// Bounds of a tree, from yaml-cpp or from bytes: a config is a few hundred nodes; an alias
// bomb or a corrupt cache is refused, not expanded.
constexpr std::size_t kMaxConfigNodes = 100000;
constexpr int kMaxConfigDepth = 64;

// The tree as bytes: per node its kind (1 byte) and line + 1 (4 bytes, little-endian), then
// a scalar's length (4) and text, or a list's count (4) and items, or a mapping's count (4)
// and keys and values in turn.
std::string tree_to_bytes(const ConfigNode& root);
// The tree back; nullopt for bytes that are not exactly one well-formed tree within the bounds.
std::optional<ConfigNode> tree_from_bytes(std::string_view bytes);

}  // namespace gpudiag
