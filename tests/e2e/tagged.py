"""Reading output that went through gpudiag's relay: TAG SEP PAYLOAD per line, where
SEP ' ' means the payload ended with its own newline and '+' means the relay added
it (a long line cut to fit one slurmstepd message, or no final newline)."""
import re

_TAG = re.compile(rb"^(\[[^\]\n]*\])([ +])")


def untag(line):
    """A text line without its [host:rank] tag (unchanged if it has none)."""
    m = _TAG.match(line.encode(errors="surrogateescape"))
    return line[m.end():] if m else line


def tag_of(line):
    m = _TAG.match(line.encode(errors="surrogateescape"))
    return m.group(1).decode() if m else None


def strip(data: bytes, tag: bytes) -> bytes:
    """The exact bytes of the stream whose lines carry `tag`; other lines are skipped."""
    out = []
    for line in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        if line.startswith(tag) and len(line) > len(tag) and line[len(tag)] in b" +":
            out.append(line[len(tag) + 1:])
            if line[len(tag)] == ord(" "):
                out.append(b"\n")
    return b"".join(out)
