#pragma once
// The rendezvous check: before the program starts, can this node reach the address a
// torch.distributed rendezvous will use? A MASTER_ADDR that does not resolve makes torch
// retry for its whole rendezvous timeout (30 minutes), printing a gai error each second:
// the silent hang gpudiag exists to prevent. gather_rendezvous does the I/O once per step
// and node (a lookup with a deadline, a UDP connect() that sends nothing, a bind of the
// port on the first node); judge_rendezvous is pure.
#include <netdb.h>

#include <optional>
#include <string>
#include <vector>

#include "spank/plan/dist_env.h"

namespace gpudiag {

// One address the step's program may rendezvous on, and where it came from.
struct RendezvousTarget {
  std::string var;       // MASTER_ADDR, PET_MASTER_ADDR or PET_RDZV_ENDPOINT
  std::string host;
  int port = 0;          // 0: none known
  bool user_set = false; // the user's value, not the plugin's
  bool bind_here = false;  // this node hosts it (the plugin's address, first node): bind the port
};

// The variables the program will see (the user's values win, as apply_env does), reduced
// to the distinct hosts to check. `user` holds the user's values, `plugin` the plan's.
std::vector<RendezvousTarget> rendezvous_targets(const EnvList& user, const EnvList& plugin, bool first_node);

struct RendezvousFacts {
  RendezvousTarget target;
  bool timed_out = false;        // the lookup did not answer within the deadline
  std::string resolve_error;     // gai_strerror; "" when it resolved
  std::vector<std::string> addresses;  // numeric, as resolved
  std::string route_error;       // "" when some address has a route
  std::string local_interface;   // the interface that reaches it ("" when unknown)
  std::string bind_error;        // "" when the port could be bound (or was not tried)
};

// The lookup runs on its own thread: a resolver that hangs costs `deadline_s`, not the step.
// `lookup` is getaddrinfo (a test gives one that hangs, as a dead DNS server does).
using AddrLookup = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
RendezvousFacts gather_rendezvous(const RendezvousTarget& target, double deadline_s,
                                  AddrLookup lookup = ::getaddrinfo);

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
