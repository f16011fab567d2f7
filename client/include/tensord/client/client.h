// tensord/client/client.h — the tensord C++ client in one include: Session
// (connect to a daemon or spawn an embedded one), Tensor handles, and op
// calls that run meta locally and stream to the daemon.
//
//   auto s = *tensord::client::Session::SpawnEmbedded();
//   tensord::client::SessionGuard use(s);
//   auto x = *tensord::client::Randn({8, 4});
//   double total = (*(*tensord::client::Sum(x)).Item()).to_double();
#ifndef TENSORD_CLIENT_CLIENT_H_
#define TENSORD_CLIENT_CLIENT_H_

#include "tensord/client/autograd.h"  // IWYU pragma: export
#include "tensord/client/ops.h"      // IWYU pragma: export
#include "tensord/client/session.h"  // IWYU pragma: export
#include "tensord/client/tensor.h"   // IWYU pragma: export

#endif  // TENSORD_CLIENT_CLIENT_H_
