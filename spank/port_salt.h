#pragma once
// MASTER_PORT's secret. The port is a function of the job and step ids (dist_env.h), so
// that every node of a step agrees on it without talking; but then another user can compute
// the next jobs' ports and listen there first, and a non-zero rank would take the squatter
// for torch's store (issue 22's adversary). So the job carries 64 random bits in its
// environment, which only its user can read: sbatch/salloc put them there for the whole
// job (its steps still get different ports), srun when it makes its own job, or when the
// job's environment lost them (--export=NONE).
#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag {

constexpr const char* kPortSaltEnv = "GPUDIAG_PORT_SALT";

// Exactly 16 lowercase hex digits; anything else (unset, edited) is 0: no salt, the
// port is the plain function of the ids, as before.
std::uint64_t parse_port_salt(const std::optional<std::string>& value);

// 64 bits from getrandom(2), as parse_port_salt reads them; nullopt if the kernel has none.
std::optional<std::string> new_port_salt();

}  // namespace gpudiag
