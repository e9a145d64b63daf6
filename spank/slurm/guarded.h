#pragma once
// Every entry point from Slurm runs inside guarded_call (ARCHITECTURE §3): no exception may
// cross into srun or slurmstepd. An exception's text can carry anyone's bytes (a path, a
// user's value) and it goes to slurmd's log and the user's terminal, so it is escaped
// (util/control_bytes.h): it cannot forge a log line or drive a terminal (issue 30).
#include <exception>
#include <string>

#include "util/control_bytes.h"

namespace gpudiag {

// `log(where, text)` writes one line; it must not throw (slurm_error does not).
template <class Log>
void log_caught(Log& log, const char* where, const char* what) noexcept {
  try {
    const std::string text = escape_control(what ? what : "");
    log(where, text.c_str());
  } catch (...) {
    log(where, "an error whose text could not be kept (out of memory)");
  }
}

// body()'s value, or `on_error` once whatever it threw is logged.
template <class Log, class F>
int guarded_call(Log&& log, const char* where, int on_error, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    log_caught(log, where, e.what());
  } catch (...) {
    log(where, "unexpected error");
  }
  return on_error;
}

}  // namespace gpudiag
