#pragma once
// Launch-layout mistakes that become a hang at the rendezvous (issue 32), each named
// with the fix. Pure: the tasks' hellos in, findings out.
//   - torchrun started more than once on a node: every copy takes the same node rank;
//   - more ranks on a node than the GPUs they see between them (NCCL: duplicate GPU);
//   - torchrun told to start more workers than the GPUs its task sees;
//   - a world size the program will not reach: WORLD_SIZE other than the step's task
//     count, or torchrun's PET_NNODES other than the nodes that run it.
#include <vector>

#include "fabric/fabric_wire.h"
#include "fabric/node_differs.h"

namespace gpudiag::fabric {

std::vector<Finding> find_layout_mistakes(const std::vector<TaskHello>& tasks, std::uint32_t total_tasks);

}  // namespace gpudiag::fabric
