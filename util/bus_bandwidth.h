#pragma once
// nccl-tests' definitions (ARCHITECTURE §6), shared by the GPU probe and the nccl check.
// algbw is the size one rank passes to the call over the time of one call; busbw
// scales it by the traffic an all_reduce needs per link, 2(n-1)/n, so that figures
// from different rank counts compare with the hardware's link speed.
namespace gpudiag {

// GB/s with nccl-tests' 1e9, not GiB/s.
inline double algbw_gbps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }
inline double allreduce_busbw_factor(int ranks) { return ranks > 0 ? 2.0 * (ranks - 1) / ranks : 0.0; }
inline double allreduce_busbw_gbps(double algbw, int ranks) { return algbw * allreduce_busbw_factor(ranks); }

}  // namespace gpudiag
