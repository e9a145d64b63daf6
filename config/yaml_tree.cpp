#include "config/yaml_tree.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

namespace gpudiag {
namespace {

struct TooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Aliases are expanded here, so the count bounds the expansion too (an alias bomb of a
// few lines would otherwise become millions of nodes).
ConfigNode convert(const YAML::Node& n, int depth, std::size_t& count) {
  if (depth > kMaxConfigDepth || ++count > kMaxConfigNodes) throw TooLarge("too large or too deeply nested");
  const int line = n.Mark().line;
  switch (n.Type()) {
    case YAML::NodeType::Null: return ConfigNode::make(ConfigNode::Kind::null, line);
    case YAML::NodeType::Scalar: return ConfigNode::make(ConfigNode::Kind::scalar, line, n.Scalar());
    case YAML::NodeType::Sequence: {
      ConfigNode out = ConfigNode::make(ConfigNode::Kind::sequence, line);
      for (const auto& item : n) out.add_item(convert(item, depth + 1, count));
      return out;
    }
    case YAML::NodeType::Map: {
      ConfigNode out = ConfigNode::make(ConfigNode::Kind::map, line);
      for (const auto& kv : n) out.add_entry(convert(kv.first, depth + 1, count), convert(kv.second, depth + 1, count));
      return out;
    }
    default: return ConfigNode::make(ConfigNode::Kind::undefined, line);
  }
}

// yaml-cpp's parser recurses once per nested flow collection before any of our bounds can
// look, so "[[[[..." of some 100,000 brackets would overflow the stack of slurmd or
// slurmstepd (third adversary review: only the admin writes the file, but a crash there is
// not a clear error). Brackets inside quotes or comments count too: a config never nests 64.
bool flow_nesting_within(std::string_view text, int max) {
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace

Result<ConfigNode> yaml_to_tree(std::string_view text, const std::string& source) {
  std::size_t count = 0;
  if (!flow_nesting_within(text, kMaxConfigDepth))
    return Result<ConfigNode>::failure("gpudiag: " + source + ": not a config: too large or too deeply nested");
  try {
    return convert(YAML::Load(std::string(text)), 0, count);
  } catch (const YAML::Exception& e) {
    std::string where = source;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1);
    return Result<ConfigNode>::failure("gpudiag: " + where + ": not valid YAML: " + e.msg);
  } catch (const TooLarge& e) {
    return Result<ConfigNode>::failure("gpudiag: " + source + ": not a config: " + e.what());
  } catch (const std::exception& e) {
    return Result<ConfigNode>::failure("gpudiag: " + source + ": " + e.what());
  }
}

}  // namespace gpudiag
