#pragma once
// The rendezvous check's facts and its verdict. The preflight gathers the facts once per
// step and node (preflight/rendezvous_check.h: a lookup with a deadline, a route, a bind);
// the plan judges them for each task, here, without I/O.
#include <optional>
#include <string>
#include <vector>

namespace gpudiag {

// One address the step's program may rendezvous on, and where it came from.
struct RendezvousTarget {
  std::string var;       // MASTER_ADDR, PET_MASTER_ADDR or PET_RDZV_ENDPOINT
  std::string host;
  int port = 0;          // 0: none known
  bool user_set = false; // the user's value, not the plugin's
  bool bind_here = false;  // this node hosts it (the plugin's address, first node): bind the port
};

struct RendezvousFacts {
  RendezvousTarget target;
  bool timed_out = false;        // the lookup did not answer within the deadline
  std::string resolve_error;     // gai_strerror; "" when it resolved
  std::vector<std::string> addresses;  // numeric, as resolved
  std::string route_error;       // "" when some address has a route
  std::string local_interface;   // the interface that reaches it ("" when unknown)
  std::string bind_error;        // "" when the port could be bound (or was not tried)
};

struct RendezvousVerdict {
  std::optional<std::string> fail;   // the program must not start
  std::vector<std::string> warnings; // the step goes on
};

// `enforce`: the preflight is on, so any problem fails the step. Without it, a problem
// with a value the user set still fails (they asked for that rendezvous); one with the
// plugin's own value is a warning, since the program may not be torch at all.
RendezvousVerdict judge_rendezvous(const std::vector<RendezvousFacts>& facts, const std::string& node,
                                   bool enforce, double deadline_s);

}  // namespace gpudiag
