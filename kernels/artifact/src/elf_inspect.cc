// ELF inspection through libelf's class-independent gelf interface (elfutils),
// on a private copy of the bytes. libelf bounds each table it hands out
// against its section and each string against its string table; what it
// does not bound (the header tables against a short file, the verneed
// chains, version indices, the fat binary's own containers) is checked here
// before it is followed.
#include "tensord/artifact/elf_inspect.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tensord/meta/errors.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "elf_inspect.cc reads little-endian objects with host loads: port the raw reads first"
#endif

namespace tensord {
namespace {

// The fat binary's container header magic ("fatBinaryHeader", as nvcc's
// fatbinary tool writes it into .nv_fatbin).
constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr size_t kFatbinHeaderBytes = 16;
// An entry's fixed part up to and including its arch word (offset 28);
// real entries are 64 bytes or more (80 for PTX since CUDA 12.x).
constexpr size_t kFatbinEntryMinBytes = 32;
constexpr uint16_t kFatbinKindPtx = 1;
constexpr uint16_t kFatbinKindCubin = 2;

// The files whose version needs count as glibc's or as the C++ runtime's.
constexpr absl::string_view kGlibcFiles[] = {"libc.so.6",     "libm.so.6",    "libpthread.so.0",
                                             "libdl.so.2",    "librt.so.1",   "libresolv.so.2",
                                             "libutil.so.1",  "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"};
constexpr absl::string_view kGlibcxxFiles[] = {"libstdc++.so.6", "libgcc_s.so.1"};

absl::Status Bad(absl::string_view what) { return RuntimeErr(absl::StrCat("artifact payload: ", what)); }

std::string LibelfError() {
  const char* m = elf_errmsg(-1);
  return m != nullptr ? m : "no libelf error recorded";
}

struct ElfEnd {
  void operator()(Elf* e) const { elf_end(e); }
};

uint16_t LoadU16(absl::string_view b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
uint32_t LoadU32(absl::string_view b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
uint64_t LoadU64(absl::string_view b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// The triple for an ELF e_machine; one table for InspectElf and the host.
std::string TripleOf(unsigned machine) {
  switch (machine) {
    case EM_X86_64: return "x86_64-linux-gnu";
    case EM_AARCH64: return "aarch64-linux-gnu";
    case EM_RISCV: return "riscv64-linux-gnu";
    case EM_PPC64: return "powerpc64le-linux-gnu";  // only little-endian objects get this far
    default: return absl::StrCat("unknown-", machine);
  }
}

std::string TypeName(unsigned type) {
  switch (type) {
    case ET_EXEC: return "an executable";
    case ET_REL: return "a relocatable object (.o)";
    case ET_CORE: return "a core dump";
    default: return "of an unknown ELF type";
  }
}

// "GLIBC_2.2.5" < "GLIBC_2.14" < "GLIBC_PRIVATE": the name up to the last
// '_', then the dotted parts, numbers by value and before words.
bool VersionLess(const std::string& a, const std::string& b) {
  const size_t ua = a.rfind('_'), ub = b.rfind('_');
  const absl::string_view pa = ua == std::string::npos ? a : absl::string_view(a).substr(0, ua);
  const absl::string_view pb = ub == std::string::npos ? b : absl::string_view(b).substr(0, ub);
  if (pa != pb) return pa < pb;
  const std::vector<absl::string_view> xa =
      absl::StrSplit(absl::string_view(a).substr(ua == std::string::npos ? a.size() : ua + 1), '.');
  const std::vector<absl::string_view> xb =
      absl::StrSplit(absl::string_view(b).substr(ub == std::string::npos ? b.size() : ub + 1), '.');
  for (size_t i = 0; i < xa.size() && i < xb.size(); ++i) {
    uint64_t na = 0, nb = 0;
    const bool da = absl::SimpleAtoi(xa[i], &na), db = absl::SimpleAtoi(xb[i], &nb);
    if (da && db && na != nb) return na < nb;
    if (da != db) return da;
    if (!da && xa[i] != xb[i]) return xa[i] < xb[i];
  }
  if (xa.size() != xb.size()) return xa.size() < xb.size();
  return a < b;
}

std::vector<std::string> SortedVersions(const std::set<std::string>& s) {
  std::vector<std::string> v(s.begin(), s.end());
  std::sort(v.begin(), v.end(), VersionLess);
  return v;
}

struct Section {
  Elf_Scn* scn = nullptr;
  GElf_Shdr shdr{};
  size_t index = 0;
  std::string name;
};

// A section's bytes as libelf hands them out, refused when they are not in
// the file or too large for gelf's int offsets.
absl::StatusOr<Elf_Data*> SectionData(const Section& s) {
  if (s.shdr.sh_type == SHT_NOBITS) {
    return Bad(absl::StrCat("section ", s.name, " (index ", s.index, ") has no bytes in the file (SHT_NOBITS)"));
  }
  if ((s.shdr.sh_flags & SHF_COMPRESSED) != 0) {
    return Bad(absl::StrCat("section ", s.name, " (index ", s.index,
                            ") is compressed (SHF_COMPRESSED), which this reader does not read"));
  }
  Elf_Data* d = elf_getdata(s.scn, nullptr);
  if (d == nullptr) {
    return Bad(absl::StrCat("section ", s.name, " (index ", s.index, ", offset ", s.shdr.sh_offset, ", ",
                            s.shdr.sh_size, " bytes) cannot be read: ", LibelfError()));
  }
  if (d->d_size > 0 && d->d_buf == nullptr) {
    return Bad(absl::StrCat("section ", s.name, " (index ", s.index, ") has no data"));
  }
  if (d->d_size > static_cast<size_t>(INT_MAX)) {
    return Bad(absl::StrCat("section ", s.name, " holds ", d->d_size, " bytes, over the limit of ", INT_MAX));
  }
  return d;
}

// The NUL-terminated string at `offset` of string table section `strtab`
// (elf_strptr checks the table's type, the offset and the terminator).
absl::StatusOr<std::string> StringAt(Elf* elf, size_t strtab, uint64_t offset, absl::string_view what) {
  const char* s = elf_strptr(elf, strtab, offset);
  if (s == nullptr) {
    return Bad(absl::StrCat(what, " names a string at offset ", offset,
                            " outside its string table (section index ", strtab, ")"));
  }
  return std::string(s);
}

// Checks that a header table of `count` entries of `entsize` bytes at
// `offset` lies inside the file of `file_bytes` bytes.
absl::Status CheckTable(absl::string_view what, uint64_t offset, uint64_t count, uint64_t entsize,
                        uint64_t file_bytes) {
  if (count == 0) return absl::OkStatus();
  if (offset > file_bytes || count > (file_bytes - offset) / entsize) {
    return Bad(absl::StrCat("the ", what, " (offset ", offset, ", ", count, " entries of ", entsize,
                            " bytes) ends past the end of the file (", file_bytes, " bytes); truncated?"));
  }
  return absl::OkStatus();
}

// The architectures in .nv_fatbin: a sequence of containers, each a 16-byte
// header {u32 magic, u16 version, u16 header size, u64 size of what follows}
// and then entries, each {u16 kind, u16, u32 header size, u64 payload size,
// u32 compressed size, u32, u16 minor, u16 major, u32 arch, ...} followed by
// its payload (padded to 8). Payloads may be compressed; the arch is in the
// entry header, so none is decompressed. Zero bytes between containers are
// the linker's alignment padding.
absl::Status ReadFatbin(absl::string_view d, std::set<int>* sm, std::set<int>* ptx) {
  size_t p = 0;
  while (p < d.size()) {
    if (d.size() - p >= 8 && LoadU64(d, p) == 0) {
      p += 8;
      continue;
    }
    if (d.size() - p < kFatbinHeaderBytes) {
      return Bad(absl::StrCat(".nv_fatbin: ", d.size() - p, " stray bytes at offset ", p,
                              ", too few for a fat binary header"));
    }
    const uint32_t magic = LoadU32(d, p);
    if (magic != kFatbinMagic) {
      return Bad(absl::StrCat(".nv_fatbin: no fat binary header at offset ", p, " (magic 0x", absl::Hex(magic),
                              ", expected 0x", absl::Hex(kFatbinMagic), ")"));
    }
    const uint64_t header_bytes = LoadU16(d, p + 6);
    const uint64_t body_bytes = LoadU64(d, p + 8);
    const uint64_t room = d.size() - p;
    if (header_bytes < kFatbinHeaderBytes || header_bytes > room || body_bytes > room - header_bytes) {
      return Bad(absl::StrCat(".nv_fatbin: the fat binary at offset ", p, " claims a ", header_bytes,
                              "-byte header and ", body_bytes, " bytes of entries, but its section has ", room,
                              " bytes left"));
    }
    const size_t end = p + header_bytes + body_bytes;
    size_t e = p + header_bytes;
    while (e < end) {
      if (end - e < kFatbinEntryMinBytes) {
        return Bad(absl::StrCat(".nv_fatbin: the entry at offset ", e, " is cut off by the end of its fat binary (",
                                end - e, " bytes left)"));
      }
      const uint16_t kind = LoadU16(d, e);
      const uint64_t entry_header = LoadU32(d, e + 4);
      const uint64_t payload = LoadU64(d, e + 8);
      const uint32_t arch = LoadU32(d, e + 28);
      if (entry_header < kFatbinEntryMinBytes || entry_header > end - e || payload > end - e - entry_header) {
        return Bad(absl::StrCat(".nv_fatbin: the entry at offset ", e, " claims a ", entry_header,
                                "-byte header and a ", payload, "-byte payload, but its fat binary has ", end - e,
                                " bytes left"));
      }
      if (kind == kFatbinKindPtx || kind == kFatbinKindCubin) {
        if (arch == 0 || arch > 9999) {
          return Bad(absl::StrCat(".nv_fatbin: the entry at offset ", e, " names architecture ", arch));
        }
        (kind == kFatbinKindPtx ? ptx : sm)->insert(static_cast<int>(arch));
      }
      // Other kinds (LTO IR, later additions) carry no code a loader runs here: skipped.
      e += entry_header + payload;
    }
    p = end;
  }
  return absl::OkStatus();
}

// What .gnu.version_r says: for each version index (vna_other), the version
// and the file it is needed from; and the set of version names per file.
struct VersionNeeds {
  std::map<uint16_t, std::pair<std::string, std::string>> by_index;  // index -> (version, file)
  std::set<std::string> glibc, glibcxx;
};

absl::StatusOr<VersionNeeds> ReadVersionNeeds(Elf* elf, const Section& s) {
  VersionNeeds out;
  TD_ASSIGN_OR_RETURN(Elf_Data * d, SectionData(s));
  const uint64_t size = d->d_size;
  // sh_info counts the entries (DT_VERNEEDNUM); neither it nor any chain
  // is followed further than the section has room for.
  const uint64_t room = size / sizeof(Elf64_Verneed);
  if (s.shdr.sh_info > room) {
    return Bad(absl::StrCat(".gnu.version_r claims ", s.shdr.sh_info, " entries but its ", size,
                            " bytes have room for ", room));
  }
  uint64_t aux_budget = size / sizeof(Elf64_Vernaux);
  uint64_t off = 0;
  for (uint64_t n = 0; n < s.shdr.sh_info; ++n) {
    GElf_Verneed vn;
    if (off > size - sizeof(Elf64_Verneed) || gelf_getverneed(d, static_cast<int>(off), &vn) == nullptr) {
      return Bad(absl::StrCat(".gnu.version_r entry ", n, " points outside its section (offset ", off, " of ", size,
                              " bytes)"));
    }
    TD_ASSIGN_OR_RETURN(std::string file,
                        StringAt(elf, s.shdr.sh_link, vn.vn_file, absl::StrCat(".gnu.version_r entry ", n)));
    const bool glibc = std::find(std::begin(kGlibcFiles), std::end(kGlibcFiles), file) != std::end(kGlibcFiles);
    const bool glibcxx =
        std::find(std::begin(kGlibcxxFiles), std::end(kGlibcxxFiles), file) != std::end(kGlibcxxFiles);
    uint64_t aux = off + vn.vn_aux;
    for (uint64_t a = 0; a < vn.vn_cnt; ++a) {
      GElf_Vernaux vna;
      if (aux_budget == 0) {
        return Bad(absl::StrCat(".gnu.version_r entry ", n, " has more versions than its section has room for"));
      }
      --aux_budget;
      if (aux > size - sizeof(Elf64_Vernaux) || gelf_getvernaux(d, static_cast<int>(aux), &vna) == nullptr) {
        return Bad(absl::StrCat(".gnu.version_r entry ", n, " version ", a, " points outside its section (offset ",
                                aux, " of ", size, " bytes)"));
      }
      TD_ASSIGN_OR_RETURN(std::string name, StringAt(elf, s.shdr.sh_link, vna.vna_name,
                                                     absl::StrCat(".gnu.version_r entry ", n, " version ", a)));
      out.by_index[static_cast<uint16_t>(vna.vna_other & 0x7fff)] = {name, file};
      if (glibc && absl::StartsWith(name, "GLIBC_")) out.glibc.insert(name);
      if (glibcxx) out.glibcxx.insert(name);
      if (vna.vna_next == 0) break;
      aux += vna.vna_next;
    }
    if (vn.vn_next == 0) break;
    off += vn.vn_next;
  }
  return out;
}

// The tags of .dynamic that InspectElf reads.
struct Dynamic {
  std::vector<uint64_t> needed, rpath, runpath;  // string offsets
  std::optional<uint64_t> soname, flags_1, symtab, strtab, versym, verneed;
};

absl::StatusOr<Dynamic> ReadDynamic(const Section& s) {
  TD_ASSIGN_OR_RETURN(Elf_Data * d, SectionData(s));
  Dynamic dyn;
  const size_t n = d->d_size / sizeof(Elf64_Dyn);
  for (size_t i = 0; i < n; ++i) {
    GElf_Dyn e;
    if (gelf_getdyn(d, static_cast<int>(i), &e) == nullptr) {
      return Bad(absl::StrCat(".dynamic entry ", i, " cannot be read: ", LibelfError()));
    }
    const uint64_t v = e.d_un.d_val;
    switch (e.d_tag) {
      case DT_NULL: return dyn;
      case DT_NEEDED: dyn.needed.push_back(v); break;
      case DT_RPATH: dyn.rpath.push_back(v); break;
      case DT_RUNPATH: dyn.runpath.push_back(v); break;
      case DT_SONAME: dyn.soname = v; break;
      case DT_FLAGS_1: dyn.flags_1 = v; break;
      case DT_SYMTAB: dyn.symtab = v; break;
      case DT_STRTAB: dyn.strtab = v; break;
      case DT_VERSYM: dyn.versym = v; break;
      case DT_VERNEED: dyn.verneed = v; break;
      default: break;
    }
  }
  return Bad(absl::StrCat(".dynamic has no DT_NULL entry among its ", n, " entries"));
}

// The loader reads the dynamic tags, the reader the section headers: a file
// where they disagree would describe one object and run another.
absl::Status CheckAgrees(absl::string_view tag, const std::optional<uint64_t>& value, const Section* s) {
  if (!value.has_value() && s == nullptr) return absl::OkStatus();
  if (value.has_value() && s != nullptr && *value == s->shdr.sh_addr) return absl::OkStatus();
  return Bad(absl::StrCat(tag, " (", value.has_value() ? absl::StrCat("0x", absl::Hex(*value)) : "absent",
                          ") and the section headers (",
                          s != nullptr ? absl::StrCat(s->name, " at 0x", absl::Hex(s->shdr.sh_addr)) : "no section",
                          ") disagree"));
}

}  // namespace

std::string HostTargetTriple() {
#if defined(__x86_64__)
  return TripleOf(EM_X86_64);
#elif defined(__aarch64__)
  return TripleOf(EM_AARCH64);
#elif defined(__riscv) && __riscv_xlen == 64
  return TripleOf(EM_RISCV);
#elif defined(__powerpc64__)
  return TripleOf(EM_PPC64);
#else
#error "HostTargetTriple: add this architecture's e_machine"
#endif
}

absl::StatusOr<ElfInfo> InspectElf(absl::string_view so) {
  static const bool libelf_ready = elf_version(EV_CURRENT) != EV_NONE;
  if (!libelf_ready) return InternalErr("libelf: elf_version(EV_CURRENT) failed");

  // The identification bytes first, for messages that say what the file is.
  if (so.size() < EI_NIDENT || std::memcmp(so.data(), ELFMAG, SELFMAG) != 0) {
    return Bad(absl::StrCat("not an ELF file (its ", so.size(), " bytes do not start with \\x7fELF)"));
  }
  if (so[EI_CLASS] != ELFCLASS64) {
    return Bad(absl::StrCat("the shared object is ", so[EI_CLASS] == ELFCLASS32 ? "32-bit" : "of an unknown class",
                            " (EI_CLASS ", static_cast<int>(so[EI_CLASS]), "); tensord loads 64-bit objects"));
  }
  if (so[EI_DATA] != ELFDATA2LSB) {
    return Bad(absl::StrCat("the shared object is not little-endian (EI_DATA ", static_cast<int>(so[EI_DATA]), ")"));
  }
  if (so.size() < sizeof(Elf64_Ehdr)) {
    return Bad(absl::StrCat("truncated: ", so.size(), " bytes, less than an ELF header"));
  }
  Elf64_Ehdr raw;
  std::memcpy(&raw, so.data(), sizeof raw);
  if (raw.e_type != ET_DYN) {
    return Bad(absl::StrCat("the file is ", TypeName(raw.e_type), ", not a shared object (e_type ", raw.e_type, ")"));
  }
  // The header tables against the file's length, before libelf maps them.
  if (raw.e_shnum > 0 && raw.e_shentsize != sizeof(Elf64_Shdr)) {
    return Bad(absl::StrCat("section headers of ", raw.e_shentsize, " bytes (expected ", sizeof(Elf64_Shdr), ")"));
  }
  if (raw.e_phnum > 0 && raw.e_phentsize != sizeof(Elf64_Phdr)) {
    return Bad(absl::StrCat("program headers of ", raw.e_phentsize, " bytes (expected ", sizeof(Elf64_Phdr), ")"));
  }
  TD_RETURN_IF_ERROR(CheckTable("section header table", raw.e_shoff,
                                raw.e_shnum == 0 && raw.e_shoff != 0 ? 1 : raw.e_shnum, sizeof(Elf64_Shdr),
                                so.size()));
  TD_RETURN_IF_ERROR(CheckTable("program header table", raw.e_phoff, raw.e_phnum, sizeof(Elf64_Phdr), so.size()));

  std::string bytes(so);  // libelf may keep pointers into it; never the caller's memory
  std::unique_ptr<Elf, ElfEnd> owned(elf_memory(bytes.data(), bytes.size()));
  Elf* elf = owned.get();
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF) {
    return Bad(absl::StrCat("not an ELF file (libelf: ", LibelfError(), ")"));
  }
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh) == nullptr) return Bad(absl::StrCat("the ELF header cannot be read: ", LibelfError()));
  ElfInfo info;
  info.target_triple = TripleOf(eh.e_machine);

  size_t shnum = 0, phnum = 0, shstrndx = 0;
  if (elf_getshdrnum(elf, &shnum) != 0 || elf_getphdrnum(elf, &phnum) != 0 ||
      elf_getshdrstrndx(elf, &shstrndx) != 0) {
    return Bad(absl::StrCat("the header tables cannot be read: ", LibelfError()));
  }
  // Extended numbering: the real count comes from section 0, check it too.
  TD_RETURN_IF_ERROR(CheckTable("section header table", eh.e_shoff, shnum, sizeof(Elf64_Shdr), so.size()));
  TD_RETURN_IF_ERROR(CheckTable("program header table", eh.e_phoff, phnum, sizeof(Elf64_Phdr), so.size()));

  std::optional<GElf_Phdr> pt_dynamic;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr) {
      return Bad(absl::StrCat("program header ", i, " cannot be read: ", LibelfError()));
    }
    if (ph.p_type == PT_GNU_STACK && (ph.p_flags & PF_X) != 0) info.has_executable_stack = true;
    if (ph.p_type == PT_DYNAMIC) pt_dynamic = ph;
  }

  std::optional<Section> dynsym, dynamic, versym, verneed, fatbin;
  for (size_t i = 1; i < shnum; ++i) {
    Section s;
    s.index = i;
    s.scn = elf_getscn(elf, i);
    if (s.scn == nullptr || gelf_getshdr(s.scn, &s.shdr) == nullptr) {
      return Bad(absl::StrCat("section header ", i, " cannot be read: ", LibelfError()));
    }
    TD_ASSIGN_OR_RETURN(s.name, StringAt(elf, shstrndx, s.shdr.sh_name, absl::StrCat("section header ", i)));
    std::optional<Section>* slot = nullptr;
    switch (s.shdr.sh_type) {
      case SHT_DYNSYM: slot = &dynsym; break;
      case SHT_DYNAMIC: slot = &dynamic; break;
      case SHT_GNU_versym: slot = &versym; break;
      case SHT_GNU_verneed: slot = &verneed; break;
      default:
        if (s.name == ".nv_fatbin") slot = &fatbin;
        break;
    }
    if (slot == nullptr) continue;
    if (slot->has_value()) {
      return Bad(absl::StrCat("two sections of one kind: ", (*slot)->name, " (index ", (*slot)->index, ") and ",
                              s.name, " (index ", i, ")"));
    }
    *slot = std::move(s);
  }
  if (!dynamic.has_value()) return Bad("the shared object has no .dynamic section");
  if (!pt_dynamic.has_value() || pt_dynamic->p_offset != dynamic->shdr.sh_offset ||
      pt_dynamic->p_vaddr != dynamic->shdr.sh_addr) {
    return Bad(absl::StrCat("PT_DYNAMIC (", pt_dynamic.has_value() ? "" : "absent",
                            pt_dynamic.has_value() ? absl::StrCat("offset ", pt_dynamic->p_offset) : "",
                            ") and the .dynamic section (offset ", dynamic->shdr.sh_offset, ") disagree"));
  }

  // .dynamic: needed libraries, name, search paths, flags.
  TD_ASSIGN_OR_RETURN(Dynamic dyn, ReadDynamic(*dynamic));
  const size_t dynstr = dynamic->shdr.sh_link;
  if (dyn.flags_1.has_value() && (*dyn.flags_1 & DF_1_PIE) != 0) {
    return Bad("the file is an executable (a position-independent one: DF_1_PIE), not a shared object (e_type 3)");
  }
  {
    Elf_Scn* scn = elf_getscn(elf, dynstr);
    GElf_Shdr sh;
    if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr) {
      return Bad(absl::StrCat(".dynamic links string table section ", dynstr, ", which does not exist"));
    }
    Section str;
    str.shdr = sh;
    str.name = ".dynstr";
    TD_RETURN_IF_ERROR(CheckAgrees("DT_STRTAB", dyn.strtab, &str));
  }
  TD_RETURN_IF_ERROR(CheckAgrees("DT_SYMTAB", dyn.symtab, dynsym ? &*dynsym : nullptr));
  TD_RETURN_IF_ERROR(CheckAgrees("DT_VERSYM", dyn.versym, versym ? &*versym : nullptr));
  TD_RETURN_IF_ERROR(CheckAgrees("DT_VERNEED", dyn.verneed, verneed ? &*verneed : nullptr));
  for (uint64_t off : dyn.needed) {
    TD_ASSIGN_OR_RETURN(std::string s, StringAt(elf, dynstr, off, "DT_NEEDED"));
    info.needed.push_back(std::move(s));
  }
  if (dyn.soname.has_value()) {
    TD_ASSIGN_OR_RETURN(info.soname, StringAt(elf, dynstr, *dyn.soname, "DT_SONAME"));
  }
  for (const auto* list : {&dyn.rpath, &dyn.runpath}) {
    for (uint64_t off : *list) {
      TD_ASSIGN_OR_RETURN(std::string s,
                          StringAt(elf, dynstr, off, list == &dyn.rpath ? "DT_RPATH" : "DT_RUNPATH"));
      for (absl::string_view dir : absl::StrSplit(s, ':', absl::SkipEmpty())) info.rpath.emplace_back(dir);
    }
  }

  // Version needs, then the dynamic symbols with their versions.
  VersionNeeds needs;
  if (verneed.has_value()) {
    TD_ASSIGN_OR_RETURN(needs, ReadVersionNeeds(elf, *verneed));
  }
  info.glibc_versions = SortedVersions(needs.glibc);
  info.glibcxx_versions = SortedVersions(needs.glibcxx);
  if (dynsym.has_value()) {
    TD_ASSIGN_OR_RETURN(Elf_Data * syms, SectionData(*dynsym));
    const size_t nsyms = syms->d_size / sizeof(Elf64_Sym);
    Elf_Data* vers = nullptr;
    if (versym.has_value()) {
      TD_ASSIGN_OR_RETURN(vers, SectionData(*versym));
      if (vers->d_size / sizeof(Elf64_Versym) != nsyms) {
        return Bad(absl::StrCat(".gnu.version has ", vers->d_size / sizeof(Elf64_Versym), " entries for ", nsyms,
                                " dynamic symbols"));
      }
    }
    std::set<std::string> strong, functions;
    for (size_t i = 1; i < nsyms; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(syms, static_cast<int>(i), &sym) == nullptr) {
        return Bad(absl::StrCat("dynamic symbol ", i, " cannot be read: ", LibelfError()));
      }
      const int bind = GELF_ST_BIND(sym.st_info);
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
      TD_ASSIGN_OR_RETURN(std::string name,
                          StringAt(elf, dynsym->shdr.sh_link, sym.st_name, absl::StrCat("dynamic symbol ", i)));
      if (name.empty()) continue;
      if (sym.st_shndx != SHN_UNDEF) {
        const int type = GELF_ST_TYPE(sym.st_info);
        const int vis = GELF_ST_VISIBILITY(sym.st_other);
        if ((type == STT_FUNC || type == STT_GNU_IFUNC) && (vis == STV_DEFAULT || vis == STV_PROTECTED)) {
          functions.insert(std::move(name));
        }
        continue;
      }
      ElfSymbolRef ref;
      ref.weak = bind == STB_WEAK;
      if (vers != nullptr) {
        GElf_Versym v;
        if (gelf_getversym(vers, static_cast<int>(i), &v) == nullptr) {
          return Bad(absl::StrCat(".gnu.version entry ", i, " cannot be read: ", LibelfError()));
        }
        const uint16_t index = v & 0x7fff;
        if (index > VER_NDX_GLOBAL) {
          auto it = needs.by_index.find(index);
          if (it == needs.by_index.end()) {
            return Bad(absl::StrCat("undefined symbol '", name, "' has version index ", index,
                                    ", which no .gnu.version_r entry defines"));
          }
          ref.version = it->second.first;
          ref.library = it->second.second;
        }
      }
      if (!ref.weak) strong.insert(name);
      ref.name = std::move(name);
      info.undefined.push_back(std::move(ref));
    }
    info.undefined_symbols.assign(strong.begin(), strong.end());
    info.defined_functions.assign(functions.begin(), functions.end());
  }

  if (fatbin.has_value()) {
    TD_ASSIGN_OR_RETURN(Elf_Data * d, SectionData(*fatbin));
    std::set<int> sm, ptx;
    TD_RETURN_IF_ERROR(ReadFatbin(absl::string_view(static_cast<const char*>(d->d_buf), d->d_size), &sm, &ptx));
    info.cuda_sm.assign(sm.begin(), sm.end());
    info.cuda_ptx.assign(ptx.begin(), ptx.end());
  }
  return info;
}

void SetElfFacts(const ElfInfo& elf, Manifest* m) {
  m->target_triple = elf.target_triple;
  m->glibc_versions = elf.glibc_versions;
  m->glibcxx_versions = elf.glibcxx_versions;
  m->needed = elf.needed;
  m->undefined_symbols = elf.undefined_symbols;
  m->cuda_sm = elf.cuda_sm;
  m->cuda_ptx = elf.cuda_ptx;
}

}  // namespace tensord
