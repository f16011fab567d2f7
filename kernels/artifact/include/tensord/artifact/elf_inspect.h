// tensord/artifact/elf_inspect.h — what a shared object needs in order to
// run, read from its ELF file with libelf, without loading it: the builder
// writes it into an artifact's manifest, and the daemon reads it again from
// the payload before any of the artifact's code runs.
//
//   absl::StatusOr<ElfInfo> info = InspectElf(so_bytes);
//   info->undefined_symbols;   // {"expf", "memcpy", ...}
//   info->cuda_sm;             // {80, 90}: machine code in .nv_fatbin
//
// Every byte is treated as hostile: each table, string offset, version index
// and chain is checked against its section before it is read, and a broken
// file gives a RuntimeError that names what is wrong, never a crash.
#ifndef TENSORD_ARTIFACT_ELF_INSPECT_H_
#define TENSORD_ARTIFACT_ELF_INSPECT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/artifact/artifact.h"

namespace tensord {

// One undefined dynamic symbol: what the object needs the loader to find.
struct ElfSymbolRef {
  std::string name;     // "expf"
  std::string version;  // "GLIBC_2.27", from .gnu.version/.gnu.version_r; "" when unversioned
  std::string library;  // the file that version is needed from ("libm.so.6"); "" when unversioned
  bool weak = false;    // STB_WEAK: the object runs (with a null address) when nothing defines it
};

struct ElfInfo {
  std::string target_triple;                   // from e_machine/EI_CLASS: "x86_64-linux-gnu", "aarch64-linux-gnu"
  std::vector<std::string> needed;             // DT_NEEDED, in order
  std::vector<std::string> glibc_versions;     // version needs on libc.so.6 (and libm, libpthread, libdl, librt)
  std::vector<std::string> glibcxx_versions;   // on libstdc++.so.6 and libgcc_s.so.1 (GLIBCXX_, CXXABI_, GCC_)
  std::vector<std::string> undefined_symbols;  // strong (non-weak) undefined dynamic symbols, sorted
  std::vector<std::string> defined_functions;  // defined global/weak STT_FUNC dynamic symbols, sorted
  std::vector<int> cuda_sm;                    // sm_XY machine code in .nv_fatbin, ascending, unique
  std::vector<int> cuda_ptx;                   // compute_XY PTX in .nv_fatbin, ascending, unique
  std::vector<ElfSymbolRef> undefined;         // every undefined dynamic symbol, weak ones too, in .dynsym order
  std::vector<std::string> rpath;              // DT_RPATH then DT_RUNPATH entries, split at ':', in order
  std::string soname;                          // DT_SONAME, "" when absent
  bool has_executable_stack = false;           // PT_GNU_STACK with PF_X (loading it makes thread stacks executable)
};

// Reads `so` (the bytes of an ELF shared object; copied, `so` need not
// outlive the call). RuntimeError ("artifact payload: ...") when it is not a
// well-formed ELF shared object of this reader's kinds (ET_DYN without
// DF_1_PIE, 64-bit, little-endian), when a table or string points outside its
// section or the file, when .dynamic and the section headers disagree, or
// when the fat binary in .nv_fatbin is malformed. Version strings are sorted
// by version number ("GLIBC_2.2.5" before "GLIBC_2.14").
absl::StatusOr<ElfInfo> InspectElf(absl::string_view so);

// Writes `elf`'s build facts into a manifest's fields: the target triple,
// glibc and libstdc++ versions, needed libraries, undefined symbols and
// CUDA architectures. What the builder records, and what the daemon
// requires a manifest to say of its payload.
void SetElfFacts(const ElfInfo& elf, Manifest* m);

// The triple of the machine this code was compiled for ("x86_64-linux-gnu").
std::string HostTargetTriple();

}  // namespace tensord

#endif  // TENSORD_ARTIFACT_ELF_INSPECT_H_
