// Fuzz target: kernel artifact files and the ELF objects inside them
// (kernels/artifact/), bytes a client uploads that the daemon reads before
// it decides whether to load anything. The first byte picks what the rest
// is: an artifact file (ParseArtifact, then InspectElf on its payload when
// the container is sound) or a bare shared object (InspectElf). Any input
// must give a result or an error status, never a crash or a hang. Seeds: a
// small shared object compiled against tensord_kernel.h, and artifacts of it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensord/artifact/artifact.h"
#include "tensord/artifact/elf_inspect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    absl::StatusOr<tensord::Artifact> a = tensord::ParseArtifact(bytes);
    if (a.ok()) (void)tensord::InspectElf(a->payload);
    (void)tensord::ParseManifestOnly(bytes);
  } else {
    (void)tensord::InspectElf(bytes);
  }
  return 0;
}
