// The artifact container and its JSON manifest (nlohmann/json); SHA-256
// through OpenSSL's EVP interface.
#include "tensord/artifact/artifact.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>

#include <cstring>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tensord/meta/errors.h"

namespace tensord {
namespace {

using Json = nlohmann::json;

uint32_t ReadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t ReadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The signature block (nothing for none).
void AppendSignatures(std::string* out, const std::vector<ArtifactSignature>& signatures) {
  if (signatures.empty()) return;
  AppendU32(out, static_cast<uint32_t>(signatures.size()));
  for (const ArtifactSignature& s : signatures) {
    AppendU32(out, static_cast<uint32_t>(s.key_name.size()));
    *out += s.key_name;
    *out += s.signature;
  }
}

// The container's parts, checked against the file's length.
struct Parts {
  uint32_t format_version = 0;
  absl::string_view manifest;
  absl::string_view payload;
  absl::string_view signatures;
  absl::string_view hashed;  // header + manifest + payload
};

absl::StatusOr<Parts> SplitContainer(absl::string_view file) {
  if (file.size() > kMaxArtifactBytes) {
    return RuntimeErr(absl::StrCat("artifact: the file holds ", file.size(), " bytes, over the limit of ",
                                   kMaxArtifactBytes));
  }
  if (file.size() < kArtifactHeaderBytes || file.substr(0, kArtifactMagic.size()) != kArtifactMagic) {
    return RuntimeErr(absl::StrCat("artifact: not a tensord kernel artifact (the file's ", file.size(),
                                   " bytes do not start with the artifact magic)"));
  }
  Parts p;
  p.format_version = ReadU32(file.data() + 8);
  if (p.format_version == 0 || p.format_version > kArtifactFormatVersion) {
    return RuntimeErr(absl::StrCat("artifact: format version ", p.format_version,
                                   p.format_version == 0 ? " is invalid" : " is newer than this tensord reads",
                                   " (it reads versions 1 to ", kArtifactFormatVersion, ")"));
  }
  const uint32_t m = ReadU32(file.data() + 12);
  const uint64_t n = ReadU64(file.data() + 16);
  if (m > kMaxManifestBytes) {
    return RuntimeErr(absl::StrCat("artifact: the manifest's length ", m, " is over the limit of ", kMaxManifestBytes,
                                   " bytes"));
  }
  const uint64_t rest = file.size() - kArtifactHeaderBytes;
  if (m > rest || n > rest - m) {
    return RuntimeErr(absl::StrCat("artifact: truncated: the header promises a manifest of ", m,
                                   " bytes and a payload of ", n, " bytes, but only ", rest,
                                   " bytes follow the header"));
  }
  p.manifest = file.substr(kArtifactHeaderBytes, m);
  p.payload = file.substr(kArtifactHeaderBytes + m, n);
  p.signatures = file.substr(kArtifactHeaderBytes + m + n);
  p.hashed = file.substr(0, kArtifactHeaderBytes + m + n);
  return p;
}

absl::StatusOr<std::vector<ArtifactSignature>> ParseSignatures(absl::string_view block) {
  std::vector<ArtifactSignature> out;
  if (block.empty()) return out;
  auto broken = [&](absl::string_view what) {
    return RuntimeErr(absl::StrCat("artifact: the signature block (", block.size(), " bytes) is malformed: ", what));
  };
  if (block.size() < 4) return broken("shorter than its count");
  const uint32_t count = ReadU32(block.data());
  if (count > kMaxArtifactSignatures) {
    return broken(absl::StrCat(count, " signatures, over the limit of ", kMaxArtifactSignatures));
  }
  size_t at = 4;
  for (uint32_t i = 0; i < count; ++i) {
    if (block.size() - at < 4) return broken(absl::StrCat("signature ", i, " is truncated"));
    const uint32_t len = ReadU32(block.data() + at);
    at += 4;
    if (len > 256 || block.size() - at < len + 64ull) return broken(absl::StrCat("signature ", i, " is truncated"));
    ArtifactSignature s;
    s.key_name = std::string(block.substr(at, len));
    s.signature = std::string(block.substr(at + len, 64));
    at += len + 64;
    out.push_back(std::move(s));
  }
  if (at != block.size()) return broken(absl::StrCat(block.size() - at, " bytes follow the last signature"));
  return out;
}

// Field readers: a missing or mistyped field is an error naming it.
absl::Status FieldError(absl::string_view field, absl::string_view want) {
  return RuntimeErr(absl::StrCat("artifact manifest: field '", field, "' must be ", want));
}

absl::Status GetString(const Json& j, const char* field, std::string* out, bool required = true) {
  auto it = j.find(field);
  if (it == j.end()) return required ? FieldError(field, "present (a string)") : absl::OkStatus();
  if (!it->is_string()) return FieldError(field, "a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

template <typename T>
absl::Status GetUnsigned(const Json& j, const char* field, T* out) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_number_unsigned()) return FieldError(field, "a non-negative integer");
  const uint64_t v = it->get<uint64_t>();
  if (v > static_cast<uint64_t>(static_cast<T>(-1))) return FieldError(field, "in range");
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

absl::Status GetStrings(const Json& j, const char* field, std::vector<std::string>* out) {
  auto it = j.find(field);
  if (it == j.end()) return absl::OkStatus();  // absent: none
  if (!it->is_array()) return FieldError(field, "a list of strings");
  for (const Json& e : *it) {
    if (!e.is_string()) return FieldError(field, "a list of strings");
    out->push_back(e.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status GetInts(const Json& j, const char* field, std::vector<int>* out) {
  auto it = j.find(field);
  if (it == j.end()) return absl::OkStatus();
  if (!it->is_array()) return FieldError(field, "a list of integers");
  for (const Json& e : *it) {
    if (!e.is_number_unsigned() || e.get<uint64_t>() > 10000) return FieldError(field, "a list of integers 0..10000");
    out->push_back(static_cast<int>(e.get<uint64_t>()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest cannot fail for SHA-256 on memory short of an allocation
  // failure in OpenSSL; then the digest stays zero and every comparison fails.
  std::memset(digest, 0, sizeof(digest));
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 32));
}

std::string ManifestToJson(const Manifest& m, int indent) {
  Json j;
  j["format_version"] = m.format_version;
  j["abi_version"] = m.abi_version;
  j["library"] = m.library;
  Json ops = Json::array();
  for (const ArtifactOp& op : m.ops) {
    Json o;
    o["schema"] = op.schema;
    o["shape_rule"] = op.shape_rule;
    if (!op.derivative.empty()) o["derivative"] = op.derivative;
    Json sym = Json::object();
    if (!op.cpu_symbol.empty()) sym["cpu"] = op.cpu_symbol;
    if (!op.cuda_symbol.empty()) sym["cuda"] = op.cuda_symbol;
    o["symbols"] = sym;
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);
  j["target_triple"] = m.target_triple;
  j["glibc_versions"] = m.glibc_versions;
  j["glibcxx_versions"] = m.glibcxx_versions;
  j["needed"] = m.needed;
  j["undefined_symbols"] = m.undefined_symbols;
  j["cuda_sm"] = m.cuda_sm;
  j["cuda_ptx"] = m.cuda_ptx;
  j["payload_sha256"] = m.payload_sha256;
  j["payload_bytes"] = m.payload_bytes;
  j["builder"] = m.builder;
  j["source_hash"] = m.source_hash;
  // Invalid UTF-8 in a string (a schema the builder read from the object)
  // is replaced, not thrown: the manifest's reader validates every field.
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<Manifest> ManifestFromJson(absl::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return RuntimeErr("artifact manifest: not valid JSON");
  if (!j.is_object()) return RuntimeErr("artifact manifest: not a JSON object");
  Manifest m;
  TD_RETURN_IF_ERROR(GetUnsigned(j, "format_version", &m.format_version));
  TD_RETURN_IF_ERROR(GetUnsigned(j, "abi_version", &m.abi_version));
  TD_RETURN_IF_ERROR(GetString(j, "library", &m.library));
  auto ops = j.find("ops");
  if (ops == j.end() || !ops->is_array()) return FieldError("ops", "a list of ops");
  if (ops->size() > kMaxArtifactOps) {
    return RuntimeErr(absl::StrCat("artifact manifest: ", ops->size(), " ops, over the limit of ", kMaxArtifactOps));
  }
  for (size_t i = 0; i < ops->size(); ++i) {
    const Json& o = (*ops)[i];
    const std::string where = absl::StrCat("ops[", i, "]");
    if (!o.is_object()) return FieldError(where, "an object");
    ArtifactOp op;
    TD_RETURN_IF_ERROR(GetString(o, "schema", &op.schema));
    TD_RETURN_IF_ERROR(GetString(o, "shape_rule", &op.shape_rule));
    TD_RETURN_IF_ERROR(GetString(o, "derivative", &op.derivative, /*required=*/false));
    auto sym = o.find("symbols");
    if (sym == o.end() || !sym->is_object()) return FieldError(where + ".symbols", "an object");
    TD_RETURN_IF_ERROR(GetString(*sym, "cpu", &op.cpu_symbol, false));
    TD_RETURN_IF_ERROR(GetString(*sym, "cuda", &op.cuda_symbol, false));
    m.ops.push_back(std::move(op));
  }
  TD_RETURN_IF_ERROR(GetString(j, "target_triple", &m.target_triple));
  TD_RETURN_IF_ERROR(GetStrings(j, "glibc_versions", &m.glibc_versions));
  TD_RETURN_IF_ERROR(GetStrings(j, "glibcxx_versions", &m.glibcxx_versions));
  TD_RETURN_IF_ERROR(GetStrings(j, "needed", &m.needed));
  TD_RETURN_IF_ERROR(GetStrings(j, "undefined_symbols", &m.undefined_symbols));
  TD_RETURN_IF_ERROR(GetInts(j, "cuda_sm", &m.cuda_sm));
  TD_RETURN_IF_ERROR(GetInts(j, "cuda_ptx", &m.cuda_ptx));
  TD_RETURN_IF_ERROR(GetString(j, "payload_sha256", &m.payload_sha256));
  TD_RETURN_IF_ERROR(GetUnsigned(j, "payload_bytes", &m.payload_bytes));
  TD_RETURN_IF_ERROR(GetString(j, "builder", &m.builder, false));
  TD_RETURN_IF_ERROR(GetString(j, "source_hash", &m.source_hash, false));
  return m;
}

absl::StatusOr<Manifest> ParseManifestOnly(absl::string_view file) {
  TD_ASSIGN_OR_RETURN(Parts p, SplitContainer(file));
  TD_ASSIGN_OR_RETURN(Manifest m, ManifestFromJson(p.manifest));
  if (m.format_version != p.format_version) {
    return RuntimeErr(absl::StrCat("artifact: the manifest says format version ", m.format_version,
                                   " but the header says ", p.format_version));
  }
  if (m.payload_bytes != p.payload.size()) {
    return RuntimeErr(absl::StrCat("artifact: the manifest says the payload holds ", m.payload_bytes,
                                   " bytes, but the file carries ", p.payload.size()));
  }
  return m;
}

absl::StatusOr<Artifact> ParseArtifact(absl::string_view file) {
  TD_ASSIGN_OR_RETURN(Parts p, SplitContainer(file));
  Artifact a;
  TD_ASSIGN_OR_RETURN(a.manifest, ParseManifestOnly(file));
  const std::string got = Sha256Hex(p.payload);
  if (got != a.manifest.payload_sha256) {
    return RuntimeErr(absl::StrCat("artifact: the payload's SHA-256 is ", got, ", but the manifest says ",
                                   a.manifest.payload_sha256, " (the file is corrupt or was altered)"));
  }
  TD_ASSIGN_OR_RETURN(a.signatures, ParseSignatures(p.signatures));
  a.payload = std::string(p.payload);
  a.content_hash = Sha256Hex(p.hashed);
  return a;
}

absl::StatusOr<std::string> SignArtifact(absl::string_view file, const std::string& private_key_pem,
                                         const std::string& key_name) {
  TD_ASSIGN_OR_RETURN(Artifact a, ParseArtifact(file));
  if (a.signatures.size() >= kMaxArtifactSignatures) {
    return RuntimeErr(absl::StrCat("artifact: it holds ", a.signatures.size(), " signatures already, the most a file may"));
  }
  if (key_name.size() > 256) return RuntimeErr("artifact: a key name is at most 256 bytes");
  FILE* f = std::fopen(private_key_pem.c_str(), "r");
  if (f == nullptr) return RuntimeErr(absl::StrCat("cannot read the key ", private_key_pem));
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> key_owner(key, EVP_PKEY_free);
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
    return RuntimeErr(absl::StrCat(private_key_pem, " is not an Ed25519 private key in PEM (make one with `openssl "
                                                    "genpkey -algorithm ed25519 -out key.pem`)"));
  }
  const std::string raw = absl::HexStringToBytes(a.content_hash);
  unsigned char sig[64];
  size_t len = sizeof(sig);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (ctx == nullptr || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const unsigned char*>(raw.data()), raw.size()) != 1 ||
      len != 64) {
    return RuntimeErr("artifact: signing with OpenSSL failed");
  }
  a.signatures.push_back({key_name, std::string(reinterpret_cast<char*>(sig), 64)});
  // The signed bytes as they are (re-serializing the manifest could change
  // its text, and with it the content hash), then the new signature block.
  TD_ASSIGN_OR_RETURN(Parts p, SplitContainer(file));
  std::string out(p.hashed);
  AppendSignatures(&out, a.signatures);
  return out;
}

absl::StatusOr<std::string> ContentHash(absl::string_view file) {
  TD_ASSIGN_OR_RETURN(Parts p, SplitContainer(file));
  return Sha256Hex(p.hashed);
}

std::string SerializeArtifact(Manifest manifest, absl::string_view payload,
                              const std::vector<ArtifactSignature>& signatures) {
  manifest.format_version = kArtifactFormatVersion;
  manifest.payload_sha256 = Sha256Hex(payload);
  manifest.payload_bytes = payload.size();
  const std::string json = ManifestToJson(manifest, 2);
  std::string out(kArtifactMagic);
  AppendU32(&out, kArtifactFormatVersion);
  AppendU32(&out, static_cast<uint32_t>(json.size()));
  AppendU64(&out, payload.size());
  out += json;
  out.append(payload.data(), payload.size());
  AppendSignatures(&out, signatures);
  return out;
}

}  // namespace tensord
