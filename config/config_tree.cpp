#include "config/config_tree.h"

namespace gpudiag {
namespace {

const ConfigNode& undefined_node() {
  static const ConfigNode kNone;
  return kNone;
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_node(std::string& out, const ConfigNode& n) {
  out.push_back(static_cast<char>(n.kind()));
  put_u32(out, static_cast<std::uint32_t>(n.line() + 1));
  switch (n.kind()) {
    case ConfigNode::Kind::scalar:
      put_u32(out, static_cast<std::uint32_t>(n.Scalar().size()));
      out += n.Scalar();
      break;
    case ConfigNode::Kind::sequence:
      put_u32(out, static_cast<std::uint32_t>(n.items().size()));
      for (const auto& item : n.items()) put_node(out, item);
      break;
    case ConfigNode::Kind::map:
      put_u32(out, static_cast<std::uint32_t>(n.entries().size()));
      for (const auto& [k, v] : n.entries()) {
        put_node(out, k);
        put_node(out, v);
      }
      break;
    default: break;
  }
}

class ByteReader {
 public:
  explicit ByteReader(std::string_view b) : b_(b) {}
  bool done() const { return at_ == b_.size(); }

  bool u32(std::uint32_t& v) {
    if (b_.size() - at_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(b_[at_ + i])) << (8 * i);
    at_ += 4;
    return true;
  }

  // Recursion is bounded by kMaxConfigDepth; every count is checked against the bytes
  // left (each node takes at least 5), so a forged count cannot make us allocate.
  bool node(ConfigNode& out, int depth) {
    if (depth > kMaxConfigDepth || ++nodes_ > kMaxConfigNodes || b_.size() - at_ < 5) return false;
    const auto kind = static_cast<unsigned char>(b_[at_++]);
    std::uint32_t line1 = 0;
    if (kind > static_cast<unsigned char>(ConfigNode::Kind::map) || !u32(line1) || line1 > 0x7fffffffu) return false;
    const int line = static_cast<int>(line1) - 1;
    const auto k = static_cast<ConfigNode::Kind>(kind);
    if (k != ConfigNode::Kind::scalar && k != ConfigNode::Kind::sequence && k != ConfigNode::Kind::map) {
      out = ConfigNode::make(k, line);
      return true;
    }
    std::uint32_t count = 0;
    if (!u32(count)) return false;
    if (k == ConfigNode::Kind::scalar) {
      if (count > b_.size() - at_) return false;
      out = ConfigNode::make(k, line, std::string(b_.substr(at_, count)));
      at_ += count;
      return true;
    }
    const std::size_t per = k == ConfigNode::Kind::map ? 10 : 5;
    if (count > (b_.size() - at_) / per) return false;
    out = ConfigNode::make(k, line);
    for (std::uint32_t i = 0; i < count; ++i) {
      ConfigNode a;
      if (!node(a, depth + 1)) return false;
      if (k == ConfigNode::Kind::sequence) {
        out.add_item(std::move(a));
        continue;
      }
      ConfigNode v;
      if (!node(v, depth + 1)) return false;
      out.add_entry(std::move(a), std::move(v));
    }
    return true;
  }

 private:
  std::string_view b_;
  std::size_t at_ = 0;
  std::size_t nodes_ = 0;
};

}  // namespace

ConfigNode ConfigNode::make(Kind kind, int line, std::string text) {
  ConfigNode n;
  n.kind_ = kind;
  n.line_ = line;
  if (kind == Kind::scalar) n.text_ = std::move(text);
  return n;
}

std::size_t ConfigNode::size() const {
  if (kind_ == Kind::sequence) return items_.size();
  if (kind_ == Kind::map) return entries_.size();
  return 0;
}

const ConfigNode& ConfigNode::operator[](std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k.IsScalar() && k.Scalar() == key) return v;
  return undefined_node();
}

const ConfigNode& ConfigNode::operator[](std::size_t i) const {
  return i < items_.size() ? items_[i] : undefined_node();
}

bool ConfigNode::operator==(const ConfigNode& o) const {
  return kind_ == o.kind_ && line_ == o.line_ && text_ == o.text_ && items_ == o.items_ && entries_ == o.entries_;
}

std::string tree_to_bytes(const ConfigNode& root) {
  std::string out;
  put_node(out, root);
  return out;
}

std::optional<ConfigNode> tree_from_bytes(std::string_view bytes) {
  ByteReader r(bytes);
  ConfigNode root;
  if (!r.node(root, 0) || !r.done()) return std::nullopt;
  return root;
}

}  // namespace gpudiag
