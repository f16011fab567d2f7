// tensord/artifact/artifact.h — the kernel artifact file: one file that
// carries a whole library of ops, i.e. a manifest (what the ops are and what
// the code needs to run) plus the shared object with their kernels.
//
//   absl::StatusOr<Artifact> a = ParseArtifact(file_bytes);   // checks the container and the hash
//   a->manifest.ops[0].schema;   // "mylib::fused_bias_gelu(Tensor x, Tensor bias) -> Tensor"
//   std::string bytes = SerializeArtifact(manifest, so_bytes); // fills payload_sha256 and payload_bytes
//
// The file (all integers little-endian):
//   bytes  0..7   magic "TDKART\r\n" (a text-mode transfer that rewrites line
//                 ends breaks the magic, not the payload silently)
//   bytes  8..11  u32 format version (kArtifactFormatVersion)
//   bytes 12..15  u32 manifest length M
//   bytes 16..23  u64 payload length P
//   then M bytes of manifest (JSON, UTF-8), P bytes of payload (the ELF
//   shared object), and the rest: the signature block, empty when unsigned
//   (u32 count, then per signature a u32 key-name length, the name, and 64
//   bytes of Ed25519 signature over the content hash's 32 raw bytes).
// The content hash, which names an artifact everywhere (uploads, caches,
// allow-lists), is the SHA-256 of bytes 0 .. 16+M+P: header, manifest and
// payload, without the signatures (adding one does not rename the artifact).
#ifndef TENSORD_ARTIFACT_ARTIFACT_H_
#define TENSORD_ARTIFACT_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

inline constexpr uint32_t kArtifactFormatVersion = 1;
inline constexpr absl::string_view kArtifactMagic = "TDKART\r\n";
inline constexpr size_t kArtifactHeaderBytes = 24;
// Limits a reader enforces before it allocates (a daemon's own limit on
// uploads may be lower): the whole file, the manifest, the ops of one
// library and the signatures.
inline constexpr uint64_t kMaxArtifactBytes = 1ull << 30;
inline constexpr uint32_t kMaxManifestBytes = 16u << 20;
inline constexpr size_t kMaxArtifactOps = 4096;
inline constexpr uint32_t kMaxArtifactSignatures = 16;

// One op of the library, as the query function of the object declares it.
struct ArtifactOp {
  std::string schema;      // "mylib::f(Tensor x) -> Tensor"
  std::string shape_rule;  // declared rule text, or "like:<built-in op>"
  std::string derivative;  // "" when not differentiable, else "name: EXPR" lines
  std::string cpu_symbol;  // "" when the library has no CPU kernel for it
  std::string cuda_symbol; // "" when the library has no CUDA kernel for it
};

// What the artifact says about itself. Build facts (triple, versions,
// symbols, architectures) are read from the object by the builder, and read
// again by the daemon before it trusts them.
struct Manifest {
  uint32_t format_version = kArtifactFormatVersion;
  uint32_t abi_version = 0;         // TD_KERNEL_ABI_VERSION the object was built against
  std::string library;              // the namespace of every op ("mylib")
  std::vector<ArtifactOp> ops;
  std::string target_triple;        // "x86_64-linux-gnu"
  std::vector<std::string> glibc_versions;     // version needs of libc.so.6 ("GLIBC_2.14")
  std::vector<std::string> glibcxx_versions;   // of libstdc++.so.6 ("GLIBCXX_3.4.29", "CXXABI_1.3")
  std::vector<std::string> needed;             // DT_NEEDED libraries ("libm.so.6")
  std::vector<std::string> undefined_symbols;  // strong undefined dynamic symbols
  std::vector<int> cuda_sm;         // machine code in the fat binary (90 = sm_90), ascending
  std::vector<int> cuda_ptx;        // PTX in the fat binary (90 = compute_90), ascending
  std::string payload_sha256;       // hex, of the payload bytes
  uint64_t payload_bytes = 0;
  std::string builder;              // "tensord 0.1.0, g++ 12.2.0, nvcc 13.0" (informative)
  std::string source_hash;          // SHA-256 (hex) of the sources and flags it was built from
};

struct ArtifactSignature {
  std::string key_name;   // the name the signer gave its key (informative: every listed key is tried)
  std::string signature;  // 64 raw bytes of Ed25519
};

struct Artifact {
  Manifest manifest;
  std::string payload;       // the shared object
  std::string content_hash;  // hex SHA-256 of header, manifest and payload
  std::vector<ArtifactSignature> signatures;
};

// Parses and checks an artifact file: the magic, a format version this
// reader knows (else "artifact format version 3 is newer than this tensord
// reads (1)"), the lengths against the file's size and the limits above, the
// manifest's JSON and field types, the payload's length and SHA-256 against
// the manifest, the signature block. RuntimeError saying what is wrong, with
// the numbers. Does not look inside the payload (see elf_inspect.h).
absl::StatusOr<Artifact> ParseArtifact(absl::string_view file);

// Reads only the header and manifest of `file`, checking the container but
// not the payload's hash (a client registering an artifact's ops before it
// uploads it; the daemon checks everything).
absl::StatusOr<Manifest> ParseManifestOnly(absl::string_view file);

// The file for `manifest` and `payload`, with payload_sha256 and
// payload_bytes filled in from the payload and the signatures appended.
std::string SerializeArtifact(Manifest manifest, absl::string_view payload,
                              const std::vector<ArtifactSignature>& signatures = {});

// The manifest as JSON text (what the file carries; `tensord inspect-kernel`
// prints it), and back. ManifestFromJson: RuntimeError naming the field.
std::string ManifestToJson(const Manifest& m, int indent = -1);
absl::StatusOr<Manifest> ManifestFromJson(absl::string_view json);

// `file` with one more signature: the Ed25519 signature, by the private
// key in PEM file `private_key_pem` (`openssl genpkey -algorithm ed25519`),
// of the content hash's 32 bytes, named `key_name`. The content hash stays
// the same. RuntimeError for a broken artifact, a key file that is not an
// Ed25519 private key, or a file that already holds kMaxArtifactSignatures.
absl::StatusOr<std::string> SignArtifact(absl::string_view file, const std::string& private_key_pem,
                                         const std::string& key_name);

// Lower-case hex SHA-256 of `bytes` (OpenSSL).
std::string Sha256Hex(absl::string_view bytes);
// The artifact's content hash computed from a file (the SHA-256 of its
// header, manifest and payload); RuntimeError when the container is broken.
absl::StatusOr<std::string> ContentHash(absl::string_view file);

}  // namespace tensord

#endif  // TENSORD_ARTIFACT_ARTIFACT_H_
