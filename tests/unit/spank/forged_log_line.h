#pragma once
// The text a hostile user gets into what the plugin logs, and how it must come out
// (issue 30): the Slurm glue's and the relays' tests use the same forgery.
#include <string>

namespace gpudiag::test {

// A newline and a forged slurmd line, ESC (a terminal sequence), DEL and C1 CSI.
inline const std::string kForgery = "bad\n[2026-01-01T00:00:00.000] error: FORGED\x1b[2J\x7f\xc2\x9b" "31m";
inline const std::string kEscaped = "bad\\x0a[2026-01-01T00:00:00.000] error: FORGED\\x1b[2J\\x7f\\xc2\\x9b31m";

}  // namespace gpudiag::test
