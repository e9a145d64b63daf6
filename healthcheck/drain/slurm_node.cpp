#include "healthcheck/drain/slurm_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "util/control_bytes.h"
#include "util/run_command.h"

namespace gpudiag {
namespace {

// scontrol's layout (slurm_sprint_node_table, the same from 22.05 to 24.11): the first
// line starts with "NodeName=", every further field line with three spaces; fields are
// Key=Value separated by spaces, except free text, which takes the rest of its line. A
// Reason of several lines goes on over lines indented deeper. Free text an admin sets
// (Comment, Extra) or the kernel reports (OS) may hold " Reason=..." or "State=...",
// so nothing is searched for: each field is taken from where the layout puts it.
constexpr std::array<std::string_view, 4> kFreeText = {"OS", "Reason", "Comment", "Extra"};
// Slurm prints these once; a second one can only come from free text imitating them.
constexpr std::array<std::string_view, 3> kOnce = {"NodeName", "State", "Reason"};

bool key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '/' ||
         c == ':';
}

// Length of the key when `s` starts with "Key=", else 0.
std::size_t key_length(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && key_char(s[i])) ++i;
  return i > 0 && i < s.size() && s[i] == '=' ? i : 0;
}

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& set, std::string_view s) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

struct Fields {
  std::map<std::string, std::string, std::less<>> values;
  std::vector<std::string> repeated;
  std::string* last = nullptr;

  void add(std::string_view key, std::string_view value) {
    auto [it, fresh] = values.emplace(std::string(key), std::string(value));
    if (!fresh && one_of(kOnce, key)) repeated.emplace_back(key);
    last = &it->second;
  }
};

// One field line: "Key=v Key=v ..." or, for free text, "Key=rest of the line".
// Returns the free-text value that lines after it may continue, or nullptr.
std::string* parse_field_line(std::string_view body, Fields& f) {
  while (!body.empty()) {
    if (body.front() == ' ') {
      body.remove_prefix(1);
      continue;
    }
    auto end = body.find(' ');
    std::string_view word = body.substr(0, end);
    std::size_t k = key_length(word);
    if (k == 0) {
      // A value with a space in a field we do not know as free text.
      if (f.last) f.last->append(" ").append(word);
    } else if (one_of(kFreeText, word.substr(0, k))) {
      f.add(word.substr(0, k), rtrim(body.substr(k + 1)));
      return f.last;
    } else {
      f.add(word.substr(0, k), word.substr(k + 1));
    }
    body = end == std::string_view::npos ? std::string_view() : body.substr(end);
  }
  return nullptr;
}

void split_state(SlurmNodeState& st) {
  std::string s = st.state;
  // sinfo-style suffixes ("DOWN*", "IDLE~"); scontrol spells them out, but be lenient.
  bool no_respond = false;
  while (!s.empty() && std::string_view("*~#%$@^-!").find(s.back()) != std::string_view::npos) {
    no_respond |= s.back() == '*';
    s.pop_back();
  }
  std::size_t start = 0;
  bool first = true;
  while (start <= s.size()) {
    auto plus = s.find('+', start);
    std::string part = s.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    if (first) st.base = part;
    else if (!part.empty()) st.flags.push_back(part);
    first = false;
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  if (no_respond && !st.has("NOT_RESPONDING")) st.flags.emplace_back("NOT_RESPONDING");
  st.drain = st.has("DRAIN");
}

std::string reason_first_line(std::string line) {
  line = std::string(rtrim(line.substr(0, line.find('\n'))));
  // "text with spaces [user@2026-11-21T08:30:00]"
  if (!line.empty() && line.back() == ']') {
    auto open = line.rfind(" [");
    if (open != std::string::npos && line.find('@', open) != std::string::npos) line.resize(open);
  }
  return line == "(null)" ? "" : line;
}

}  // namespace

bool SlurmNodeState::has(std::string_view flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

namespace {

// One node's lines, parsed as the layout above says; `error` says why not.
struct ParsedRecord {
  std::string error;
  std::string name;
  SlurmNodeState state;
  std::vector<std::string> partitions;
};

ParsedRecord parse_record(std::string_view text) {
  ParsedRecord out;
  if (text.substr(0, 9) != "NodeName=") {
    out.error = "its output does not start with NodeName=";
    return out;
  }
  Fields f;
  std::string* free_text = nullptr;  // the free-text field that deeper or unindented lines continue
  std::size_t pos = 0;
  bool first = true;
  while (pos <= text.size()) {
    auto nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    bool field_line = first || (line.size() > 3 && line.substr(0, 3) == "   " && key_length(line.substr(3)) > 0);
    if (field_line) {
      free_text = parse_field_line(first ? line : line.substr(3), f);
    } else if (free_text && !rtrim(line).empty()) {
      std::string_view more = rtrim(line);
      while (!more.empty() && more.front() == ' ') more.remove_prefix(1);
      free_text->append("\n").append(more);
    }
    first = false;
  }
  if (!f.repeated.empty()) {
    out.error = fmt::format("{}= appears more than once, so free text (a Comment or Extra with a line break) "
                            "imitates Slurm's layout and Slurm's own value cannot be told apart; the node is "
                            "left as it is: remove the line break from that text",
                            f.repeated.front());
    return out;
  }
  auto state = f.values.find("State");
  if (state == f.values.end()) {
    out.error = "no State= in its output";
    return out;
  }
  if (auto n = f.values.find("NodeName"); n != f.values.end()) out.name = n->second;
  out.state.state = state->second;
  split_state(out.state);
  if (auto r = f.values.find("Reason"); r != f.values.end()) out.state.reason = reason_first_line(r->second);
  if (auto p = f.values.find("Partitions"); p != f.values.end()) {
    std::size_t start = 0;
    const std::string& list = p->second;
    while (start < list.size()) {
      auto comma = list.find(',', start);
      std::string part = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!part.empty() && part != "(null)") out.partitions.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace

Result<SlurmNodeState> parse_scontrol_node(std::string_view text, const std::string& node) {
  auto rec = parse_record(text);
  if (!rec.error.empty())
    return Result<SlurmNodeState>::failure(fmt::format("gpudiag: scontrol show node {}: {}", node, rec.error));
  return rec.state;
}

Result<std::vector<SlurmNodeRecord>> parse_scontrol_nodes(std::string_view text) {
  using R = Result<std::vector<SlurmNodeRecord>>;
  if (text.substr(0, 9) != "NodeName=")
    return R::failure("gpudiag: scontrol show node: its output does not start with NodeName=");
  std::vector<SlurmNodeRecord> out;
  std::map<std::string, bool, std::less<>> seen;
  std::size_t start = 0;
  while (start < text.size()) {
    // The next record starts where a line starts with "NodeName=".
    std::size_t next = text.find("\nNodeName=", start);
    std::string_view one = text.substr(start, next == std::string_view::npos ? std::string_view::npos : next - start);
    auto rec = parse_record(one);
    if (!rec.error.empty()) {
      std::string name = rec.name.empty() ? std::string(one.substr(9, one.find_first_of(" \n", 9) - 9)) : rec.name;
      return R::failure(fmt::format("gpudiag: scontrol show node: node {}: {}", replace_control(name, '?'), rec.error));
    }
    if (!seen.emplace(rec.name, true).second)
      return R::failure(fmt::format("gpudiag: scontrol show node: node {} appears more than once, so free text "
                                    "(a Comment or Extra with line breaks) imitates a node of its own; nothing "
                                    "is counted: remove the line break from that text",
                                    replace_control(rec.name, '?')));
    out.push_back({std::move(rec.name), std::move(rec.state), std::move(rec.partitions)});
    if (next == std::string_view::npos) break;
    start = next + 1;
  }
  return out;
}

Result<std::vector<SlurmNodeRecord>> Scontrol::show_all() const {
  // About 1 KiB per node: 64 MiB holds a cluster of 50,000.
  constexpr std::size_t kMaxTable = 64u << 20;
  using R = Result<std::vector<SlurmNodeRecord>>;
  auto r = run_command({"scontrol", "show", "node"}, timeout_s_, kMaxTable);
  if (!r.ok())
    return R::failure("gpudiag: cannot read the nodes from Slurm: " + describe_failure("scontrol", r, timeout_s_));
  if (r.out.size() >= kMaxTable) return R::failure("gpudiag: scontrol show node: its output is over 64 MiB");
  return parse_scontrol_nodes(r.out);
}

Result<SlurmNodeState> Scontrol::show(const std::string& node) const {
  auto r = run_command({"scontrol", "show", "node", node}, timeout_s_);
  if (!r.ok()) return Result<SlurmNodeState>::failure("gpudiag: cannot read node " + node + " from Slurm: " +
                                                      describe_failure("scontrol", r, timeout_s_));
  return parse_scontrol_node(r.out, node);
}

Result<bool> Scontrol::update(const std::string& node, const std::vector<std::string>& args, const char* what) const {
  std::vector<std::string> argv = {"scontrol", "update", "NodeName=" + node};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_command(argv, timeout_s_);
  if (!r.ok())
    return Result<bool>::failure(fmt::format("gpudiag: cannot {} node {}: {}", what, node,
                                             describe_failure("scontrol", r, timeout_s_)));
  return true;
}

Result<bool> Scontrol::drain(const std::string& node, const std::string& reason) const {
  // One argv element, no shell: the reason reaches slurmctld exactly as built.
  return update(node, {"State=DRAIN", "Reason=" + reason}, "drain");
}

Result<bool> Scontrol::resume(const std::string& node) const { return update(node, {"State=RESUME"}, "resume"); }

Result<bool> Scontrol::undrain(const std::string& node) const { return update(node, {"State=UNDRAIN"}, "undrain"); }

}  // namespace gpudiag
