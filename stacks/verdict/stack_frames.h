#pragma once
// From what a stack tool printed (or what the Python reader found) to the frames that
// decide a rank's class (rank_stack.h). Pure: the I/O is in stack_report.cpp.
//
// Native frames: the main thread's, innermost first, with the innermost frames that lie
// in the C library dropped (every blocked rank sits in poll, futex or nanosleep: those
// tell ranks apart by nothing), and normalised: no address, no offset, no argument list;
// a frame without a symbol becomes "?? (module)".
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "stacks/pyframes/python_stacks.h"
#include "stacks/verdict/rank_stack.h"

namespace gpudiag {

struct NativeFrame {
  std::string function;  // "" when the tool had no symbol
  std::string module;    // the file it came from, where the tool said
  std::string source;    // gdb's "at FILE:LINE", where it said
};

// `eu-stack -m -p PID`: the frames of thread `tid` ("TID n:" blocks).
std::vector<NativeFrame> eu_stack_frames(std::string_view text, long tid);
// gdb `thread apply all bt`: the frames of the thread whose "(LWP n)" is `tid`.
std::vector<NativeFrame> gdb_frames(std::string_view text, long tid);
// The class frames of a native stack: libc's innermost frames dropped, the rest
// normalised, at most kMaxRankFrames.
std::vector<std::string> native_class_frames(const std::vector<NativeFrame>& frames);

// `py-spy dump`: the frames of the thread named "MainThread" (else the first thread),
// each "function (file:line)" with the file's base name.
std::vector<std::string> py_spy_frames(std::string_view text);
// The Python reader's result: the frames of thread `main_tid` (else the first thread
// with frames), same form.
std::vector<std::string> python_class_frames(const PyStacks& stacks, long main_tid);

// "function (file:line)" with the file's base name: one form for every Python source.
std::string python_frame(std::string_view function, std::string_view file, int line);

}  // namespace gpudiag
