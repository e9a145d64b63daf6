#pragma once
// Runs a program without a shell and collects its stdout, stderr and exit code.
#include <string>
#include <vector>

struct ProcessResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out, err;
};

ProcessResult run_process(const std::vector<std::string>& argv);
