#pragma once
// GPUDIAG_TASK_PATH marks the code a forked task runs between Slurm's fork and its exec
// when it takes a prepared plan (slurm_spank_task_init down to the relay handoff). A fork
// copies no page-table entry of a shared library's code, so each task faults in every
// 64 KiB window of gpudiag.so's code that it runs (the kernel maps 16 pages at each fault)
// and unmaps them all again at its exec. Spread over the library, that path took ten such
// faults; gcc places functions marked hot together in .text.hot, and it takes five (its
// code, its strings, libstdc++'s; docs/BENCHMARKS.md, "Where the wall time lands; the
// task's path in one place"). Mark a function here only if
// every prepared task runs it; anything it calls out of line that is not marked costs a
// window of its own.
#define GPUDIAG_TASK_PATH __attribute__((hot))
