// What the runtime does with any two backends: copy between them.
#include "tensord/runtime/backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord::runtime {

absl::Status CopyBetween(const Backend& from, const char* src, const Backend& to, char* dst, size_t n,
                         MemoryAccount& account, const Backend& host, absl::string_view op) {
  if (n == 0) return absl::OkStatus();
  absl::Status s;
  if (from.host_addressable() && to.host_addressable()) {
    std::memcpy(dst, src, n);
  } else if (to.host_addressable()) {
    s = from.CopyToHost(dst, src, n);
  } else if (from.host_addressable()) {
    s = to.CopyFromHost(dst, src, n);
  } else {
    absl::StatusOr<std::shared_ptr<Storage>> bounce =
        account.Allocate(host.allocator(), static_cast<int64_t>(n), op, /*zero_fill=*/false);
    if (!bounce.ok()) return bounce.status();
    s = from.CopyToHost((*bounce)->data(), src, n);
    if (s.ok()) s = to.CopyFromHost(dst, (*bounce)->data(), n);
  }
  if (!s.ok()) {
    return InternalErr(absl::StrCat(op, ": copying ", n, " bytes from ", from.device().ToString(), " to ",
                                    to.device().ToString(), " failed: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace tensord::runtime
