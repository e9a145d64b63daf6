#pragma once
// `gpudiag nccl-log FILE|DIR...`: the analyzer as a command.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace gpudiag {

struct NcclLogCommand {
  std::vector<std::string> paths;
  bool json = false;
  std::string fs_root = "/";
  std::string max_bytes;  // "" or a size: stop after this much
};

// Adds the subcommand and its options to `app`.
CLI::App* add_nccl_log_command(CLI::App& app, NcclLogCommand& cmd);
// Exit code: 0 clean, 1 warnings, 2 problems, 3 nothing readable or bad arguments.
int run_nccl_log_command(const NcclLogCommand& cmd);

}  // namespace gpudiag
