#!/usr/bin/python3
"""Writes the pyframes_walk seeds of the CPython versions without a debug offsets table
(3.11, 3.12) into fuzz/seeds/pyframes_walk/: one thread with two frames of `fn` in
file.py (lines 12 and 11), laid out as each version's headers say
(stacks/pyframes/python_layout.cpp derives the offsets), and images of a 3.12 whose
layout is not the one gpudiag holds (a field added to PyThreadState or to
_PyInterpreterFrame, as a patched build might), which the walk must refuse.

A seed is one mode byte (fuzz/pyframes_walk_mode.h says what it selects: the version the
ELF file states, whether PyCode_Type is known), then the memory mapped at 0x10000, where
_PyRuntime is. The 3.13 and 3.14 seeds start with the debug offsets table of Debian's
binaries instead, and are not written here.

Usage: make_pyframes_seeds.py [DIR]   (default: the seeds folder next to this script)
"""
import os
import struct
import sys

BASE = 0x10000
SIZE = 0x1400
CODE_TYPE = BASE + 0x100   # where the mode byte says PyCode_Type is
STR_TYPE = BASE + 0x180    # a type that is not PyCode_Type
TSTATE, CFRAME, FRAME0, FRAME1 = 0x10800, 0x10900, 0x10A00, 0x10B00
CODE, FILE_STR, NAME_STR, LINETABLE = 0x10C00, 0x11000, 0x11100, 0x11200
TID, FIRST_LINE = 1234, 10
# co_linetable: two entries of 2 code units each without columns (code 13), lines +1, +1:
# byte offsets 0-3 are line 11, 4-7 line 12.
LINES = bytes([0xE9, 0x02, 0xE9, 0x02])

# Mode bits 0-1 pick the version the ELF file states (fuzz/pyframes_walk_mode.h); bit 2
# says PyCode_Type is at CODE_TYPE.
MODE_311, MODE_312, MODE_CODE_TYPE = 0, 2, 4

# x86-64 offsets, as stacks/pyframes/python_layout.cpp derives them.
LAYOUT_311 = dict(interpreters_head=40, gil_in_runtime=True, gil_holder=368, gil_locked=376, threads_head=16,
                  tstate_next=8, tstate_interp=16, tstate_frame=56, native_id=160, cframe_current=8,
                  frame_code=32, frame_previous=48, frame_instr=56, frame_owner=69, code_firstlineno=72,
                  code_filename=112, code_name=120, code_qualname=128, code_linetable=136, code_adaptive=184,
                  ascii_data=48)
LAYOUT_312 = dict(interpreters_head=40, gil_in_runtime=False, gil_holder=1048, gil_locked=1056, threads_head=72,
                  tstate_next=8, tstate_interp=16, tstate_frame=56, native_id=144, cframe_current=0,
                  frame_code=0, frame_previous=8, frame_instr=56, frame_owner=70, code_firstlineno=68,
                  code_filename=112, code_name=120, code_qualname=128, code_linetable=136, code_adaptive=192,
                  ascii_data=40)


def image(l, tstate_garbage=None, frame_garbage=None):
    """The memory of a CPython with layout `l`. `tstate_garbage`/`frame_garbage`: a
    pointer put at that offset of the thread state / of each frame, where a patched
    build would have a field of its own (and `l` then has the later fields moved)."""
    m = bytearray(SIZE)

    def put(addr, value, fmt="<Q"):
        struct.pack_into(fmt, m, addr - BASE, value)

    # The interpreter sits where its threads.head lands at 0x10410 (the seeds of all
    # versions share that address; the interpreter's start may lie below the image).
    interp = 0x10410 - l["threads_head"]
    put(BASE + l["interpreters_head"], interp)
    put(interp + l["threads_head"], TSTATE)
    gil = BASE if l["gil_in_runtime"] else interp
    put(gil + l["gil_holder"], TSTATE)
    put(gil + l["gil_locked"], 1, "<i")
    put(TSTATE + l["tstate_interp"], interp)
    put(TSTATE + l["native_id"], TID)
    put(TSTATE + l["tstate_frame"], CFRAME)
    if tstate_garbage is not None:
        put(TSTATE + tstate_garbage, CODE)
    put(CFRAME + l["cframe_current"], FRAME0)
    for frame, previous, unit in ((FRAME0, FRAME1, 2), (FRAME1, 0, 0)):
        put(frame + l["frame_code"], CODE)
        put(frame + l["frame_previous"], previous)
        put(frame + l["frame_instr"], CODE + l["code_adaptive"] + 2 * unit)
        if frame_garbage is not None:
            put(frame + frame_garbage, FILE_STR)
    put(CODE + 8, CODE_TYPE)
    put(CODE + l["code_firstlineno"], FIRST_LINE, "<i")
    put(CODE + l["code_filename"], FILE_STR)
    put(CODE + l["code_name"], NAME_STR)
    put(CODE + l["code_qualname"], NAME_STR)
    put(CODE + l["code_linetable"], LINETABLE)
    for addr, text in ((FILE_STR, b"file.py"), (NAME_STR, b"fn")):
        put(addr + 8, STR_TYPE)
        put(addr + 16, len(text))
        put(addr + 32, 0x64, "<I")  # state: kind 1, compact, ascii
        m[addr - BASE + l["ascii_data"]:addr - BASE + l["ascii_data"] + len(text)] = text
    put(LINETABLE + 16, len(LINES))
    m[LINETABLE - BASE + 32:LINETABLE - BASE + 32 + len(LINES)] = LINES
    return bytes(m)


def shifted(l, keys, by=8):
    return {k: (v + by if k in keys else v) for k, v in l.items()}


def seeds():
    code = MODE_CODE_TYPE
    return {
        "cpython-3.11.2": bytes([MODE_311 | code]) + image(LAYOUT_311),
        "cpython-3.12": bytes([MODE_312 | code]) + image(LAYOUT_312),
        # A 3.12 with a pointer field added after PyThreadState.next: its interp,
        # cframe and native_thread_id sit 8 bytes later than gpudiag's layout says.
        "wrong-3.12-tstate-field-added": bytes([MODE_312 | code]) + image(
            shifted(LAYOUT_312, {"tstate_interp", "tstate_frame", "native_id"}), tstate_garbage=16),
        # A 3.12 with a pointer field added first in _PyInterpreterFrame.
        "wrong-3.12-frame-field-added": bytes([MODE_312 | code]) + image(
            shifted(LAYOUT_312, {"frame_code", "frame_previous", "frame_instr", "frame_owner"}), frame_garbage=0),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds",
                                                              "pyframes_walk")
    for name, data in seeds().items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
