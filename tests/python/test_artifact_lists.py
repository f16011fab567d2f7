"""Tensor[] arguments of a kernel artifact's op: the shape rule reads the
list (len, elements, broadcast, promote), and the kernel gets every element
as a DLTensor view through its strides (TD_ARG_TENSORS), a NULL for an
absent element of a Tensor?[]."""

import numpy as np
import pytest

import tensord
from conftest import DAEMON_BIN, Daemon, build_kernel

# listlib::sum_all(ts) = ts[0] + ts[1] + ..., float32, every element of the
# output's shape (the rule broadcasts; the kernel refuses what it would have
# to broadcast); listlib::count_present(ts) = [number of elements not None].
KERNEL = r"""
#include <tensord_kernel.h>
#include <cstdint>

static int64_t Off(const DLTensor* t, int64_t flat) {
  int64_t o = 0;
  for (int d = t->ndim - 1; d >= 0; --d) { o += (flat % t->shape[d]) * t->strides[d]; flat /= t->shape[d]; }
  return o;
}
TD_EXPORT int32_t listlib_sum_all_cpu(TdKernelEnv* env) {
  if (env->args[0].kind != TD_ARG_TENSORS) return td_fail(env, "expected a tensor list");
  const TdTensorList ts = env->args[0].value.tensors;
  DLTensor* y = &env->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < y->ndim; ++d) n *= y->shape[d];
  float* out = static_cast<float*>(y->data);
  for (int64_t i = 0; i < n; ++i) out[i] = 0;
  for (int64_t k = 0; k < ts.size; ++k) {
    const DLTensor* t = ts.data[k];
    if (t->dtype.code != kDLFloat || t->dtype.bits != 32) return td_fail(env, "float32 only");
    if (t->ndim != y->ndim) return td_fail(env, "every tensor must have the output's shape");
    for (int d = 0; d < t->ndim; ++d)
      if (t->shape[d] != y->shape[d]) return td_fail(env, "every tensor must have the output's shape");
    for (int64_t i = 0; i < n; ++i) out[i] += static_cast<const float*>(t->data)[Off(t, i)];
  }
  return TD_OK;
}
TD_EXPORT int32_t listlib_count_present_cpu(TdKernelEnv* env) {
  const TdTensorList ts = env->args[0].value.tensors;
  int64_t present = 0;
  for (int64_t k = 0; k < ts.size; ++k) present += ts.data[k] != NULL;
  static_cast<int64_t*>(env->outputs[0].data)[0] = present;
  return TD_OK;
}
static const TdOpDecl kOps[] = {
    {"listlib::sum_all(Tensor[] ts) -> Tensor",
     "check len(ts) >= 1, \"sum_all needs at least one tensor\"\n"
     "return empty(broadcast(ts), dtype=promote(ts))",
     NULL, "listlib_sum_all_cpu", NULL},
    {"listlib::count_present(Tensor?[] ts) -> Tensor", "return empty([1], dtype=int64)", NULL,
     "listlib_count_present_cpu", NULL},
};
TD_DEFINE_LIBRARY("listlib", kOps)
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary: build the `tensord` target or set TENSORD_BIN")
    return tensord.library.load(build_kernel(tmp_path_factory.mktemp("lists"), "listlib", KERNEL))


@pytest.fixture(scope="module", params=["none", "process"])
def session(request):
    """A session whose artifact kernels run in the daemon, then in a worker
    process (--artifact-isolation process: lists cross its protocol too)."""
    d = Daemon(DAEMON_BIN, extra_args=["--artifacts", "any", "--artifact-isolation", request.param])
    s = tensord.connect(d.address, set_default=False)
    yield s
    s.close()
    d.stop()


def test_meta(lib):
    m = lambda *s: tensord.empty(*s, device="meta")  # noqa: E731
    assert lib.sum_all([m(2, 1), m(1, 3)]).shape == (2, 3)
    with pytest.raises(RuntimeError, match="listlib::sum_all: sum_all needs at least one tensor"):
        lib.sum_all([])
    assert lib.count_present([m(2), None]).dtype == tensord.int64


def test_the_kernel_reads_every_element_through_its_strides(lib, session):
    rng = np.random.default_rng(3)
    vs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    with session:
        ts = [tensord.tensor(vs[0]), tensord.tensor(vs[1].T.copy()).t(), tensord.tensor(vs[2])]
        np.testing.assert_allclose(lib.sum_all(ts).numpy(), vs[0] + vs[1] + vs[2], rtol=1e-6)
        assert lib.count_present([ts[0], None, ts[1]]).tolist() == [2]
        # What the kernel refuses fails that call only.
        with pytest.raises(RuntimeError, match="every tensor must have the output's shape"):
            lib.sum_all([tensord.ones(2, 3), tensord.ones(1, 3)]).numpy()
        assert lib.sum_all([tensord.ones(2)]).tolist() == [1.0, 1.0]
