// The process's ops defined at run time (tensord.library.define) and the
// kernel artifacts their ops come from (tensord.library.load).
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tensord/artifact/artifact.h"
#include "embedded_daemon.h"
#include "tensord/client/ops.h"
#include "tensord/meta/errors.h"

namespace tensord::client {
namespace {

ExtensionOps& Registry() {
  static ExtensionOps* ops = new ExtensionOps();  // leaked: sessions and threads may outlive exit's destructors
  return *ops;
}

// Loaded artifacts' bytes by content hash (what sessions upload), and the
// libraries made of them. Leaked, as the registry.
struct Artifacts {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<const std::string>> bytes ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, size_t> signatures ABSL_GUARDED_BY(mu);  // of each hash's kept bytes
  absl::flat_hash_map<std::string, LoadedLibrary> libraries ABSL_GUARDED_BY(mu);
};

Artifacts& LoadedArtifacts() {
  static Artifacts* a = new Artifacts();
  return *a;
}

std::string DefineRule(const std::string& rule) {
  return absl::StartsWith(rule, "like:") ? rule : absl::StrCat("rule:", rule);
}

}  // namespace

absl::StatusOr<const OpEntry*> DefineOp(absl::string_view schema, absl::string_view shape_rule,
                                        absl::string_view derivative) {
  return Registry().Define(schema, shape_rule, /*artifact=*/{}, derivative);
}

const ExtensionOps& DefinedOps() { return Registry(); }

absl::StatusOr<LoadedLibrary> LoadArtifact(absl::string_view file) {
  TD_ASSIGN_OR_RETURN(Artifact a, ParseArtifact(file));
  Artifacts& loaded = LoadedArtifacts();
  // One load at a time: the check for clashes and the definitions go together.
  absl::MutexLock l(&loaded.mu);
  if (auto it = loaded.libraries.find(a.content_hash); it != loaded.libraries.end()) {
    // The same artifact; a copy with more signatures (signing keeps the
    // content hash) is what sessions upload from now on.
    if (size_t& kept = loaded.signatures[a.content_hash]; a.signatures.size() > kept) {
      kept = a.signatures.size();
      loaded.bytes[a.content_hash] = std::make_shared<const std::string>(file);
    }
    return it->second;
  }
  ExtensionOps& reg = Registry();
  // Every op checked before any is defined: a clash defines none of them.
  {
    ExtensionOps scratch;
    for (const ArtifactOp& op : a.manifest.ops) {
      absl::StatusOr<const OpEntry*> e = scratch.Define(op.schema, DefineRule(op.shape_rule), a.content_hash, op.derivative);
      if (!e.ok()) return RuntimeErr(absl::StrCat("library.load(", a.manifest.library, "): ", e.status().message()));
      const std::string name = (*e)->full_name();
      if (name.compare(0, a.manifest.library.size() + 2, a.manifest.library + "::") != 0) {
        return RuntimeErr(absl::StrCat("library.load(", a.manifest.library, "): op ", name,
                                       " is not in the library's namespace (a daemon refuses the artifact)"));
      }
      if (const OpEntry* old = reg.Find(name); old != nullptr) {
        const std::vector<ExtensionOpDef> def = reg.Defs(old->id - kFirstExtensionOpId);
        const std::string& by = def.empty() ? std::string() : def.front().artifact;
        return RuntimeErr(absl::StrCat("library.load(", a.manifest.library, "): ", name, " is already defined by ",
                                       by.empty() ? "tensord.library.define" : absl::StrCat("artifact ", by.substr(0, 12)),
                                       " in this process"));
      }
    }
  }
  LoadedLibrary lib;
  lib.name = a.manifest.library;
  lib.content_hash = a.content_hash;
  for (const ArtifactOp& op : a.manifest.ops) {
    TD_ASSIGN_OR_RETURN(const OpEntry* e, reg.Define(op.schema, DefineRule(op.shape_rule), a.content_hash, op.derivative));
    lib.ops.push_back(e);
  }
  loaded.bytes.emplace(a.content_hash, std::make_shared<const std::string>(file));
  loaded.signatures.emplace(a.content_hash, a.signatures.size());
  loaded.libraries.emplace(a.content_hash, lib);
  return lib;
}

std::shared_ptr<const std::string> LoadedArtifactBytes(absl::string_view content_hash) {
  Artifacts& loaded = LoadedArtifacts();
  absl::MutexLock l(&loaded.mu);
  auto it = loaded.bytes.find(content_hash);
  return it == loaded.bytes.end() ? nullptr : it->second;
}

absl::StatusOr<std::string> TensordBinaryPath() { return internal::FindDaemonBinary(""); }

}  // namespace tensord::client
