#pragma once
// MASTER_PORT's secret. The port is a function of the job and step ids (dist_env.h), so
// that every node of a step agrees on it without talking; but then another user can compute
// the next jobs' ports and listen there first, and a non-zero rank would take the squatter
// for torch's store (issue 22's adversary). So the job carries 64 random bits in its
// environment, which only its user can read: sbatch/salloc put them there for the whole
// job, srun when it makes its own job. The name starts with SLURM_ because srun and sbatch
// pass SLURM_* on even under --export=NONE or --export=VAR (the adversary's first break).
// The salt keys a permutation of the port range, not a shift: a job's steps still get
// different ports, but one step's port, which every user sees once torch listens on it,
// tells nothing about the next step's (the adversary's second break).
#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag {

constexpr const char* kPortSaltEnv = "SLURM_GPUDIAG_PORT_SALT";

// Exactly 16 lowercase hex digits; anything else (unset, edited) is 0: no salt, the
// port is the plain function of the ids, as before.
std::uint64_t parse_port_salt(const std::optional<std::string>& value);

// 64 bits from getrandom(2), as parse_port_salt reads them; nullopt if the kernel has none.
std::optional<std::string> new_port_salt();

// A permutation of [0, span) keyed by the salt: a small Feistel network on the fewest even
// number of bits that holds span, walked until the value falls inside (cycle walking).
// span 1 to 65536.
std::uint64_t permute_port_index(std::uint64_t index, std::uint64_t span, std::uint64_t salt);

}  // namespace gpudiag
