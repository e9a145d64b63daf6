#pragma once
// The few lines srun prints at the end of a step that hung (issue 31.3): which ranks are
// stuck, on which node, where, and where the others wait; or, when no class stands out,
// that none does and what to look at next. At most kMaxVerdictLines lines, whatever the
// number of ranks. Pure.
#include <cstddef>
#include <string>
#include <vector>

#include "stacks/verdict/stack_classes.h"

namespace gpudiag {

constexpr std::size_t kMaxVerdictLines = 5;
constexpr std::size_t kMaxVerdictLineBytes = 400;

struct VerdictInputs {
  std::vector<StackClass> classes;     // stack_classes() of every node's ranks
  int nodes_reported = 0;              // hang reports read
  std::string diag_dir;                // for the pointers to the details
  std::vector<std::string> findings;   // one line each, from the flight recorder and the NCCL logs
};

// Lines, each starting "gpudiag: " and ending in '\n'; empty when no node reported a hang.
std::vector<std::string> hang_verdict(const VerdictInputs& in);

// Where a class is, for a sentence: its innermost frame with a name, and the function
// that called it ("all_reduce (distributed_c10d.py:1320) from sync_grads").
std::string class_place(const StackClass& c);

}  // namespace gpudiag
