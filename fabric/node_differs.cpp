#include "fabric/node_differs.h"

#include <algorithm>
#include <map>
#include <set>

#include "util/text_lists.h"

namespace gpudiag::fabric {
namespace {

constexpr const char* kUnset = "(unset)";

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Derived per node by gpudiag from that node's interfaces and HCAs.
bool per_node_by_design(const std::string& name) {
  return name == "GLOO_SOCKET_IFNAME" || name == "NCCL_SOCKET_IFNAME" || name == "NCCL_IB_HCA";
}

std::string holders(const std::vector<std::string>& who) {
  std::string out;
  for (std::size_t i = 0; i < who.size() && i < 4; ++i) out += (i ? "," : "") + who[i];
  if (who.size() > 4) out += " and " + std::to_string(who.size() - 4) + " more";
  return out;
}

// Groups who has which value; `who` is a node name, or "rank R" when a node's tasks
// disagree among themselves. Returns one finding when there is more than one value.
std::optional<Finding> differing(const std::string& what, const std::map<std::string, std::vector<std::string>>& by_value,
                                 const std::string& suffix_for_minority) {
  if (by_value.size() < 2) return std::nullopt;
  // The value most hold is "elsewhere"; the others are named with their holders.
  auto majority = std::max_element(by_value.begin(), by_value.end(),
                                   [](const auto& x, const auto& y) { return x.second.size() < y.second.size(); });
  std::string msg;
  for (const auto& [value, who] : by_value) {
    if (value == majority->first) continue;
    if (!msg.empty()) msg += "; ";
    msg += what + "=" + value + " on " + holders(who) + (who.size() == 1 ? " only" : "") + suffix_for_minority;
  }
  msg += ", " + majority->first + " elsewhere";
  Finding f;
  f.kind = "differs";
  f.subject = what;
  f.message = msg;
  return f;
}

std::vector<std::string> split_commas(const std::string& s) { return split_list(s); }

}  // namespace

bool compared_env(const std::string& name) {
  if (name == "CUDA_VISIBLE_DEVICES") return false;
  return starts(name, "NCCL_") || starts(name, "GLOO_") || starts(name, "TORCH_") || starts(name, "CUDA_");
}

std::vector<Finding> find_differences(const std::vector<TaskHello>& tasks) {
  std::vector<Finding> out;
  std::set<std::string> names;
  for (const auto& t : tasks)
    for (const auto& [k, v] : t.env)
      if (compared_env(k)) names.insert(k);
  for (const std::string& name : names) {
    // Per node first: a node whose tasks agree is named as the node.
    std::map<std::string, std::map<std::string, std::vector<std::uint32_t>>> per_node;  // node -> value -> ranks
    bool user_set = false;
    for (const auto& t : tasks) {
      auto it = t.env.find(name);
      const std::string value = it == t.env.end() ? kUnset : it->second;
      per_node[t.node][value].push_back(t.rank);
      if (it != t.env.end() && !t.injected.count(name)) user_set = true;
    }
    std::map<std::string, std::vector<std::string>> by_value;
    for (const auto& [node, values] : per_node) {
      if (values.size() == 1) {
        by_value[values.begin()->first].push_back(node);
        continue;
      }
      for (const auto& [value, ranks] : values)
        for (auto r : ranks) by_value[value].push_back("rank " + std::to_string(r) + " on " + node);
    }
    auto f = differing(name, by_value, user_set ? " (user-set)" : "");
    if (!f) continue;
    // A list gpudiag derived per node follows the node's hardware; anything else set
    // differently is what a job inherited from somewhere it should not have.
    f->fatal = !(per_node_by_design(name) && !user_set);
    if (f->fatal) f->message += ": make it the same on every node (or unset it)";
    out.push_back(*f);
  }
  // The node's own facts: named, not fatal (NCCL works across these; they explain).
  std::map<std::string, std::map<std::string, std::vector<std::string>>> facts;  // what -> value -> nodes
  for (const auto& t : tasks) {
    if (!t.facts) continue;
    auto put = [&](const char* what, const std::string& v) { facts[what][v.empty() ? "(none)" : v].push_back(t.node); };
    put("driver", t.facts->driver);
    put("kernel", t.facts->kernel);
    put("rdma-core", t.facts->rdma_core);
  }
  for (const auto& [what, by_value] : facts)
    if (auto f = differing(what, by_value, "")) out.push_back(*f);
  return out;
}

bool nccl_list_selects(const std::string& value, const std::string& name, int port) {
  std::string v = value;
  if (v.empty()) return true;
  const bool exclude = v[0] == '^';
  if (exclude) v = v.substr(1);
  bool exact = false;
  if (!v.empty() && v[0] == '=') {
    exact = true;
    v = v.substr(1);
  }
  bool listed = false;
  for (std::string item : split_commas(v)) {
    int item_port = 0;
    auto colon = item.find(':');
    if (colon != std::string::npos) {  // mlx5_0:1
      const std::string p = item.substr(colon + 1);
      item_port = !p.empty() && p.size() <= 3 && p.find_first_not_of("0123456789") == std::string::npos ? std::stoi(p) : -1;
      item = item.substr(0, colon);
    }
    if ((exact ? name == item : starts(name, item.c_str())) && (item_port == 0 || port == 0 || item_port == port))
      listed = true;
  }
  return exclude ? !listed : listed;
}

bool nccl_list_matches_any(const std::string& value, const std::vector<std::string>& names) {
  if (value.empty() || value[0] == '^') return true;  // excludes: whatever is left is NCCL's to pick
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return nccl_list_selects(value, n, 0); });
}

std::vector<Finding> find_lists_matching_nothing(const std::vector<TaskHello>& tasks) {
  std::vector<Finding> out;
  std::set<std::pair<std::string, std::string>> said;  // (variable, node)
  std::map<std::string, const NodeFacts*> facts;
  for (const auto& t : tasks)
    if (t.facts) facts[t.node] = &*t.facts;
  for (const auto& t : tasks) {
    auto nf = facts.find(t.node);
    if (nf == facts.end()) continue;
    for (const char* name : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA"}) {
      auto it = t.env.find(name);
      if (it == t.env.end() || t.injected.count(name) || said.count({name, t.node})) continue;
      const bool hca = std::string(name) == "NCCL_IB_HCA";
      const auto& have = hca ? nf->second->hcas : nf->second->interfaces;
      // GLOO_SOCKET_IFNAME takes exact names only.
      const std::vector<std::string> items = split_commas(it->second);
      const bool ok = std::string(name) == "GLOO_SOCKET_IFNAME"
                          ? std::all_of(items.begin(), items.end(),
                                        [&](const std::string& n) {
                                          return std::find(have.begin(), have.end(), n) != have.end();
                                        })
                          : nccl_list_matches_any(it->second, have);
      if (ok) continue;
      said.insert({name, t.node});
      Finding f;
      f.kind = "no_match";
      f.fatal = true;
      f.subject = t.node;
      f.message = std::string(name) + "=" + it->second + " (user-set) matches no " + (hca ? "HCA" : "interface") +
                  " on " + t.node + " (it has " + (have.empty() ? std::string("none") : holders(have)) +
                  "): fix the list or unset it";
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace gpudiag::fabric
