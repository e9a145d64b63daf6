#pragma once
// `gpudiag stacks JOB` runs one task per node of the job with `srun --jobid` from outside
// the job, where srun asks for one node unless told otherwise: the node count comes from
// squeue, so every node of the job gets its section.
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpudiag {

// Pure: the node count `squeue --noheader --format=%D` printed for one job.
Result<int> parse_squeue_node_count(std::string_view text, const std::string& job);
// Runs squeue (no shell, with a deadline).
Result<int> job_node_count(const std::string& job, double timeout_s);

}  // namespace gpudiag
