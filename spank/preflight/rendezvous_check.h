#pragma once
// The rendezvous check: before the program starts, can this node reach the address a
// torch.distributed rendezvous will use? A MASTER_ADDR that does not resolve makes torch
// retry for its whole rendezvous timeout (30 minutes), printing a gai error each second:
// the silent hang gpudiag exists to prevent. gather_rendezvous does the I/O once per step
// and node (a lookup with a deadline, a UDP connect() that sends nothing, a bind of the
// port on the first node); the plan judges the facts
// (judge_rendezvous, plan/rendezvous_verdict.h).
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstddef>
#include <string>
#include <vector>

#include "spank/plan/dist_env.h"
#include "spank/plan/rendezvous_verdict.h"

namespace gpudiag {

// The variables the program will see (the user's values win, as apply_env does), reduced
// to the distinct hosts to check. `user` holds the user's values, `plugin` the plan's.
std::vector<RendezvousTarget> rendezvous_targets(const EnvList& user, const EnvList& plugin, bool first_node);

// The label of the one entry of a SIOCGIFCONF list that holds the IPv4 address `local`; ""
// when none does, or several do (then getifaddrs's order, which is Gloo's, decides: the
// kernel lists SIOCGIFCONF in another order).
std::string sole_ipv4_holder(const struct ifreq* list, std::size_t n, const struct in_addr& local);

// The lookup runs on its own thread: a resolver that hangs costs `deadline_s`, not the step.
// `lookup` is getaddrinfo (a test gives one that hangs, as a dead DNS server does).
using AddrLookup = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
RendezvousFacts gather_rendezvous(const RendezvousTarget& target, double deadline_s,
                                  AddrLookup lookup = ::getaddrinfo);

}  // namespace gpudiag
