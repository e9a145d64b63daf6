#include "config/config_file.h"

#include "config/config_source.h"
#include "config/config_tree.h"
#include "config/yaml_tree.h"

namespace gpudiag {

Result<Config> parse_config(std::string_view yaml_text, const std::string& source) {
  auto tree = yaml_to_tree(yaml_text, source);
  if (!tree) return Result<Config>::failure(tree.error());
  return read_config(*tree, source);
}

Result<Config> load_config_file(const std::string& path) {
  auto source = ConfigSource::open(path);
  if (!source) return Result<Config>::failure(source.error());
  auto text = source.value().text();
  if (!text) return Result<Config>::failure(text.error());
  return parse_config(*text, path);
}

}  // namespace gpudiag
