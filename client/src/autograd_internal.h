// Internal helpers shared by ops.cc, op_autograd.cc, autograd_requests.cc
// and autograd.cc: edges of the client's mirror of the autograd graph.
#ifndef TENSORD_CLIENT_SRC_AUTOGRAD_INTERNAL_H_
#define TENSORD_CLIENT_SRC_AUTOGRAD_INTERNAL_H_

#include <memory>
#include <utility>

#include "tensord/client/tensor.h"

namespace tensord::client::internal {

// The edge a node gets for input `t`: {t's grad_fn, output_nr} for a non-leaf,
// {t's AccumulateGrad node, 0} for a leaf that requires grad (created on
// first use and shared while referenced), {nullptr, 0} otherwise.
std::pair<std::shared_ptr<GradNode>, int> GradEdge(const std::shared_ptr<TensorImpl>& t);

// The grad_fn of a tensor the daemon's engine produced with create_graph (a
// .grad, an autograd.grad result, a callback's incoming gradient): the daemon
// knows the real node; the client records that there is one ("GradBackward").
std::shared_ptr<GradNode> EngineResultNode();

// The next node's GradNode::seq (creation order; thread-safe).
uint64_t NextNodeSeq();

// A meta tensor's version counter (shared by its views), made on first need.
const std::shared_ptr<uint64_t>& VersionCounter(TensorImpl& t);

// What the meta engine checks of a saved tensor when a backward reads it:
// the version it was saved at (not tracked when `track_version` is false),
// its dtype and sizes (for the error text) and the node that produced it
// (`grad_fn_name`/`output_nr`, when it has one; `tensor`, to name the node
// that produces it when the error is raised).
SavedMeta DescribeSaved(const std::shared_ptr<TensorImpl>& t, bool track_version);

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_SRC_AUTOGRAD_INTERNAL_H_
