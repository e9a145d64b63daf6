#pragma once
// The few facts the Python reader needs from an ELF file (libpython3.N.so or a python
// executable): where .PyRuntime and the symbols _PyRuntime, Py_Version and PyCode_Type
// are, and how virtual addresses map to file offsets. The file belongs to whoever
// runs the program, so it is parsed as hostile input: every table is bounded and
// checked against the file's size.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::pyframes {

// Reads `len` bytes at file offset `off` into `out`; false when the file is shorter.
using FileRead = std::function<bool(std::uint64_t off, void* out, std::size_t len)>;

struct ElfLoad {
  std::uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
};

struct ElfFacts {
  std::vector<ElfLoad> loads;
  std::optional<std::uint64_t> pyruntime_section;  // the .PyRuntime section's address
  std::optional<std::uint64_t> py_runtime, py_version, code_type;  // symbol addresses
  bool stripped = true;  // neither .dynsym nor .symtab
};

// Facts about the ELF file read through `read` (`size` bytes), or an error text.
struct ElfResult {
  std::optional<ElfFacts> facts;
  std::string error;
  bool out_of_time = false;  // `deadline` passed before the tables were read
};
// Reads the first symbol table of each kind only (libpython has one .dynsym and one
// .symtab), and looks at `deadline` between reads: a file may name thousands of
// tables, each within the bounds, that together take hours to read.
ElfResult parse_elf(const FileRead& read, std::uint64_t size,
                    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

// The file offset of virtual address `vaddr`, where a PT_LOAD segment holds it from the file.
std::optional<std::uint64_t> file_offset_of(const ElfFacts& facts, std::uint64_t vaddr);

}  // namespace gpudiag::pyframes
