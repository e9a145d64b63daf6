#pragma once
// Facts about this machine and this program that several tools print or look up.
#include <string>
#include <string_view>

namespace gpudiag {

// The host name up to its first dot, as Slurm names nodes ("gpu7" for "gpu7.cluster");
// "localhost" when the kernel will not say.
std::string short_hostname();
// The host name as the kernel has it ("" when it will not say).
std::string hostname();
// A name cut at its first dot: the same rule for names from Slurm and from the kernel.
std::string short_name(const std::string& name);
// The same cut, without a copy (a forked task compares names without allocating).
std::string_view short_name_of(std::string_view name);

// The running binary's directory, from /proc/self/exe ("" when unreadable): tools find
// their helpers relative to it, in the build tree as installed.
std::string self_exe_path();
std::string self_exe_dir();

}  // namespace gpudiag
