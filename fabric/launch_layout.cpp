#include "fabric/launch_layout.h"

#include <map>
#include <set>

#include "util/text_lists.h"
#include "util/visible_gpus.h"

namespace gpudiag::fabric {
namespace {

std::optional<long> whole(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty() || it->second.size() > 9) return std::nullopt;
  for (char c : it->second)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stol(it->second);
}

Finding layout(const std::string& subject, const std::string& message) {
  return Finding{"layout", true, subject, message};
}

}  // namespace

std::vector<Finding> find_layout_mistakes(const std::vector<TaskHello>& tasks, std::uint32_t total_tasks) {
  std::vector<Finding> out;
  std::map<std::string, std::vector<const TaskHello*>> by_node;
  for (const auto& t : tasks) by_node[t.node].push_back(&t);
  std::set<std::string> torchrun_nodes;
  for (const auto& [node, ts] : by_node) {
    int torchruns = 0;
    std::set<std::string> devices;  // distinct CUDA_VISIBLE_DEVICES entries the node's tasks see
    bool all_known = true;
    for (const TaskHello* t : ts) {
      if (t->launcher == "torchrun") ++torchruns;
      auto it = t->env.find("CUDA_VISIBLE_DEVICES");
      if (it == t->env.end()) all_known = false;
      else
        for (const auto& d : split_list(it->second))
          if (!d.empty()) devices.insert(d);
    }
    if (torchruns > 0) torchrun_nodes.insert(node);
    if (torchruns > 1)
      out.push_back(layout(node, "torchrun runs " + std::to_string(torchruns) + " times on " + node +
                                     " (once per Slurm task): every copy takes the same node rank and the rendezvous "
                                     "never completes; run one task per node: srun --ntasks-per-node=1 torchrun ..."));
    const auto ranks = ts.size();
    if (torchruns == 0 && all_known && !devices.empty() && ranks > devices.size())
      out.push_back(layout(node, std::to_string(ranks) + " tasks on " + node + " share " +
                                     std::to_string(devices.size()) +
                                     " GPUs between them: NCCL stops at a duplicate GPU; use --ntasks-per-node=" +
                                     std::to_string(devices.size()) + " or --gpus-per-task=1"));
    for (const TaskHello* t : ts) {
      if (t->launcher != "torchrun") continue;
      const auto cvd = t->env.find("CUDA_VISIBLE_DEVICES");
      const int gpus = cvd == t->env.end() ? 0 : count_visible_gpus(cvd->second).value_or(0);
      auto nproc = whole(t->env, "PET_NPROC_PER_NODE");
      if (gpus > 0 && nproc && *nproc > gpus) {
        out.push_back(layout(node, "torchrun on " + node + " starts " + std::to_string(*nproc) +
                                       " workers but its task sees " + std::to_string(gpus) +
                                       " GPUs: set --nproc-per-node=" + std::to_string(gpus) +
                                       " (or give the task more GPUs, e.g. --gpus-per-node)"));
        break;
      }
    }
  }
  // The world size: for plain tasks WORLD_SIZE, for torchrun the node count.
  for (const auto& t : tasks) {
    if (t.launcher == "torchrun") {
      auto nnodes = whole(t.env, "PET_NNODES");
      if (nnodes && static_cast<std::size_t>(*nnodes) != torchrun_nodes.size()) {
        out.push_back(layout("PET_NNODES", "torchrun waits for " + std::to_string(*nnodes) +
                                               " nodes (PET_NNODES/--nnodes) but runs on " +
                                               std::to_string(torchrun_nodes.size()) +
                                               ": the rendezvous never completes; launch it on " +
                                               std::to_string(*nnodes) + " nodes or unset PET_NNODES"));
        break;
      }
      continue;
    }
    auto world = whole(t.env, "WORLD_SIZE");
    if (world && static_cast<std::uint32_t>(*world) != total_tasks) {
      out.push_back(layout("WORLD_SIZE", "WORLD_SIZE=" + std::to_string(*world) + " on " + t.node +
                                             " but the step runs " + std::to_string(total_tasks) +
                                             " tasks: the rendezvous waits for ranks that never come; unset "
                                             "WORLD_SIZE (gpudiag sets it) or launch " + std::to_string(*world) +
                                             " tasks"));
      break;
    }
  }
  return out;
}

}  // namespace gpudiag::fabric
