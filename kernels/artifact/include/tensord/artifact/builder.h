// tensord/artifact/builder.h — builds a kernel artifact from sources: compiles
// them against the kernel ABI header, links a shared object, reads its ops
// from its query function, checks them as the daemon will, and writes the
// artifact file. What `tensord build-kernel` runs.
//
//   BuildOptions o;
//   o.name = "mylib";
//   o.sources = {"scale.cc", "scale.cu"};
//   o.output = "mylib.tdk";
//   o.cache_dir = "/home/me/.cache/tensord/kernels";
//   absl::StatusOr<BuildResult> r = BuildArtifact(o);   // r->manifest.ops, r->content_hash
//
// It loads the built object (dlopen) into the calling process to call its
// query function: run it in a build tool, never in the daemon.
#ifndef TENSORD_ARTIFACT_BUILDER_H_
#define TENSORD_ARTIFACT_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tensord/artifact/artifact.h"

namespace tensord {

struct BuildOptions {
  std::string name;                       // library name; every op's namespace must equal it
  std::vector<std::string> sources;       // .c (g++ -x c -std=c11), .cc/.cpp/.cxx (g++ -std=c++17), .cu (nvcc)
  std::vector<std::string> cuda_archs;    // {"80","90"}: sm_XY code for each, PTX for the last; empty = {"80","90"}
  std::vector<std::string> extra_cflags;       // to every g++ compile (not to nvcc: see extra_cuda_cflags)
  std::vector<std::string> extra_cuda_cflags;  // to every nvcc compile
  std::vector<std::string> extra_ldflags;      // to the link, after the objects ("-lfoo", "-L/dir")
  std::vector<std::string> include_dirs;       // -I for g++ and nvcc, after the ABI header's directory
  std::string output;                     // the artifact path to write (replaced atomically)
  std::string cache_dir;                  // "" = no cache; else <cache_dir>/<source_hash>.tdk, created on demand
  std::string cxx = "g++";                // compiler and linker, looked up in PATH; nvcc's host compiler too
  std::string nvcc;                       // "" = /usr/local/cuda/bin/nvcc, then nvcc in PATH
  bool verbose = false;                   // print each command to stderr as it runs
};

struct BuildResult {
  Manifest manifest;
  std::string content_hash;  // of the written artifact (artifact.h)
  bool from_cache = false;   // copied from cache_dir, nothing compiled
  std::string log;           // the commands run and what they printed (warnings)
};

// Builds options.output from options.sources.
//
// The source hash (manifest.source_hash, and the cache key) is the SHA-256
// of: the ABI header, each source's name and content, the content of every
// header the sources include outside the system directories (the compilers'
// -MM lists), every option that changes the object (name, flags, include
// dirs, CUDA architectures), and the compilers' version lines.
//
// Errors (RuntimeError, "build-kernel: ..."): bad options (no name, no
// sources, an unknown source extension, a .cu source without nvcc); a
// compile or link that fails, with the compiler's output cut to 8 KiB; an
// object without tensord_library() or built for a newer ABI; a library name,
// schema, shape rule or op namespace that the daemon would refuse, naming
// the op; an op without a symbol, or naming a symbol the object does not
// export; a payload InspectElf refuses; the output or cache not writable.
absl::StatusOr<BuildResult> BuildArtifact(const BuildOptions& options);

// A source file given as text (a build on a client's behalf).
struct SourceText {
  std::string name;  // a base name: letters, digits, '_', '-', '.'; a source or header extension
  std::string text;
};

// Builds an artifact in another process, `tensord_binary build-kernel`,
// from `files` written to a scratch directory: the objects a build loads
// (to read tensord_library()) are never loaded into the caller, a daemon
// building for a client. `options`: name, CUDA architectures, flags and
// cache_dir as BuildArtifact takes them (sources and output are the
// files'). The build's processes are killed after `timeout`. Returns the
// artifact's bytes. Errors: RuntimeError for a file name that is not a
// plain base name with a known extension (.c .cc .cpp .cxx .cu .h .hpp .cuh
// .inc), for more than 64 files, or the build's own error (its output, cut
// to 8 KiB); DeadlineExceeded when it ran out of time.
absl::StatusOr<std::string> BuildArtifactInChild(const std::string& tensord_binary, const BuildOptions& options,
                                                 const std::vector<SourceText>& files, absl::Duration timeout);

}  // namespace tensord

#endif  // TENSORD_ARTIFACT_BUILDER_H_
