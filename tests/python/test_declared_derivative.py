"""Derivatives declared with an op: in a kernel artifact's manifest (run by
the daemon's autograd, in table ops and the library's own ops) and with
tensord.library.define. gradcheck passes on the daemon; the gradients equal
those of the same function written in built-in ops; meta mode and the
daemon agree on which inputs get a gradient and on which saved tensors a
backward reads (a second backward, an in-place change); double backward
works through a derivative written in table ops."""
import os
import re
import subprocess

import numpy as np
import pytest

import tensord
import tensord.nn.functional as F
from conftest import DAEMON_BIN, ROOT, Daemon, build_kernel, subprocess_env

EXAMPLE = os.path.join(ROOT, "examples", "custom_kernel", "fused_bias_gelu.cc")

# gradlib::scale_sq(x, s) = s * x^2 and gradlib::mul_add(a, b, c) = a * b + c
# (float32 and float64, any strides), derivatives in table ops; c of mul_add
# gets no gradient (no line for it). scale_sq_wrong's derivative is wrong (a
# factor 2 short); twice32's kernel takes float32 only.
KERNELS = r"""
#include <tensord_kernel.h>
#include <cstdint>

static int64_t Numel(const DLTensor* t) { int64_t n = 1; for (int d = 0; d < t->ndim; ++d) n *= t->shape[d]; return n; }
static int64_t Off(const DLTensor* t, int64_t flat) {
  int64_t o = 0;
  for (int d = t->ndim - 1; d >= 0; --d) { o += (flat % t->shape[d]) * t->strides[d]; flat /= t->shape[d]; }
  return o;
}
template <typename T> static void ScaleSq(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const T s = static_cast<T>(env->args[1].value.f);
  T* y = static_cast<T*>(env->outputs[0].data);
  for (int64_t i = 0; i < Numel(x); ++i) { const T v = static_cast<const T*>(x->data)[Off(x, i)]; y[i] = s * v * v; }
}
template <typename T> static void MulAdd(TdKernelEnv* env) {
  const DLTensor* a = env->args[0].value.tensor; const DLTensor* b = env->args[1].value.tensor;
  const DLTensor* c = env->args[2].value.tensor;
  T* y = static_cast<T*>(env->outputs[0].data);
  for (int64_t i = 0; i < Numel(a); ++i)
    y[i] = static_cast<const T*>(a->data)[Off(a, i)] * static_cast<const T*>(b->data)[Off(b, i)] +
           static_cast<const T*>(c->data)[Off(c, i)];
}
TD_EXPORT int32_t gradlib_scale_sq_cpu(TdKernelEnv* env) {
  if (env->args[0].value.tensor->dtype.bits == 64) ScaleSq<double>(env); else ScaleSq<float>(env);
  return TD_OK;
}
TD_EXPORT int32_t gradlib_mul_add_cpu(TdKernelEnv* env) {
  if (env->args[0].value.tensor->dtype.bits == 64) MulAdd<double>(env); else MulAdd<float>(env);
  return TD_OK;
}
TD_EXPORT int32_t gradlib_twice32_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "float32 only");
  for (int64_t i = 0; i < Numel(x); ++i)
    static_cast<float*>(env->outputs[0].data)[i] = 2 * static_cast<const float*>(x->data)[Off(x, i)];
  return TD_OK;
}
TD_EXPORT int32_t gradlib_opt_scale_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const DLTensor* w = env->args[1].kind == TD_ARG_TENSOR ? env->args[1].value.tensor : NULL;
  float* y = static_cast<float*>(env->outputs[0].data);
  for (int64_t i = 0; i < Numel(x); ++i)
    y[i] = static_cast<const float*>(x->data)[Off(x, i)] * (w ? static_cast<const float*>(w->data)[Off(w, i)] : 1.0f);
  return TD_OK;
}
#define FLOATS "check x.dtype == float32 or x.dtype == float64, \"float32 or float64\"\n"
static const TdOpDecl kOps[] = {
    {"gradlib::scale_sq(Tensor x, float s) -> Tensor", FLOATS "return empty(x.shape, dtype=x.dtype)",
     "x: grad * x * (2 * s)", "gradlib_scale_sq_cpu", NULL},
    {"gradlib::mul_add(Tensor a, Tensor b, Tensor c) -> Tensor",
     "check a.shape == b.shape and b.shape == c.shape and a.dtype == b.dtype and b.dtype == c.dtype, \"same\"\n"
     "return empty(a.shape, dtype=a.dtype)",
     "a: grad * b\nb: grad * a", "gradlib_mul_add_cpu", NULL},
    {"gradlib::scale_sq_wrong(Tensor x, float s) -> Tensor", FLOATS "return empty(x.shape, dtype=x.dtype)",
     "x: grad * x * s", "gradlib_scale_sq_cpu", NULL},
    {"gradlib::twice32(Tensor x) -> Tensor", "return empty(x.shape, dtype=x.dtype)", "x: grad * 2",
     "gradlib_twice32_cpu", NULL},
    {"gradlib::opt_scale(Tensor x, Tensor? w=None) -> Tensor", "return empty(x.shape, dtype=x.dtype)",
     "x: grad * w\nw: grad * x", "gradlib_opt_scale_cpu", NULL},
};
TD_DEFINE_LIBRARY("gradlib", kOps)
"""


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary: build the `tensord` target or set TENSORD_BIN")
    tmp = tmp_path_factory.mktemp("derivatives")
    with open(EXAMPLE) as f:
        gelu_src = f.read().replace("mylib", "gelulib")
    return (tensord.library.load(build_kernel(tmp, "gradlib", KERNELS)),
            tensord.library.load(build_kernel(tmp, "gelulib", gelu_src)))


@pytest.fixture(scope="module")
def session():
    d = Daemon(DAEMON_BIN, extra_args=["--artifacts", "any"])
    s = tensord.connect(d.address, set_default=False)
    yield s
    s.close()
    d.stop()


def test_the_manifest_carries_the_derivative(libs):
    gradlib, gelulib = libs
    r = subprocess.run([DAEMON_BIN, "inspect-kernel", gradlib.path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert '"derivative": "x: grad * x * (2 * s)"' in r.stdout


def test_gradcheck_passes_on_the_daemon(libs, session):
    gradlib, gelulib = libs
    with session:
        tensord.manual_seed(0)
        x = tensord.randn(3, 5, dtype=tensord.float64, requires_grad=True)
        b = tensord.randn(5, dtype=tensord.float64, requires_grad=True)
        assert tensord.autograd.gradcheck(lambda t: gradlib.scale_sq(t, 1.5), (x,))
        assert tensord.autograd.gradcheck(gelulib.fused_bias_gelu, (x, b))
        # A strided input reaches the backward kernel through its strides.
        xt = tensord.randn(5, 3, dtype=tensord.float64).t().requires_grad_()
        assert tensord.autograd.gradcheck(gelulib.fused_bias_gelu, (xt, b))


def test_gradients_equal_the_built_in_ops(libs, session):
    _, gelulib = libs
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((6, 4)).astype(np.float32)
    bv = rng.standard_normal(4).astype(np.float32)
    gv = rng.standard_normal((6, 4)).astype(np.float32)
    with session:
        grads = []
        for f in (gelulib.fused_bias_gelu, lambda x, b: F.gelu(x + b)):
            x = tensord.tensor(xv, requires_grad=True)
            b = tensord.tensor(bv, requires_grad=True)
            y = f(x, b)
            y.backward(tensord.tensor(gv))
            grads.append((x.grad.numpy(), b.grad.numpy()))
        assert y.grad_fn is not None
        np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5, atol=1e-5)
        y = gelulib.fused_bias_gelu(tensord.tensor(xv, requires_grad=True), tensord.tensor(bv))
        assert y.grad_fn.name() == "FusedBiasGeluBackward0"


def test_double_backward_through_table_ops(libs, session):
    gradlib, _ = libs
    with session:
        x = tensord.tensor([1.0, -2.0, 3.0], dtype=tensord.float64, requires_grad=True)
        y = gradlib.scale_sq(x, 1.5)
        (g,) = tensord.autograd.grad(y.sum(), x, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), [3.0, -6.0, 9.0])
        g.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])


def _outcome(fn):
    try:
        return ("ok", fn())
    except (RuntimeError, NotImplementedError) as e:
        return (type(e).__name__, re.sub(r"^(backward|grad)( \(at [^)]*\))?: ", "", str(e)))


def _tensor(values, device):
    if device == "meta":
        return tensord.empty(len(values), device="meta")
    return tensord.tensor(values)


@pytest.mark.parametrize("program", ["no_line", "twice", "twice_retained", "inplace_read", "inplace_unread",
                                     "reads_none"])
def test_meta_and_daemon_agree(libs, session, program):
    gradlib, _ = libs

    def run(device):
        a = _tensor([1.0, 2.0], device).requires_grad_()
        b = _tensor([3.0, 4.0], device).requires_grad_()
        c = _tensor([5.0, 6.0], device).requires_grad_()
        if program == "reads_none":  # x's line reads w, an optional tensor left out
            return _outcome(lambda: gradlib.opt_scale(a, None).sum().backward())
        if program.startswith("inplace"):
            # A non-leaf input changed after the op saved it: only b's line
            # reads a, so it matters only when b needs a gradient.
            if program == "inplace_unread":
                b.requires_grad_(False)
            a2 = a * 1
            y = gradlib.mul_add(a2, b, c)
            a2.mul_(2)
            return _outcome(lambda: y.sum().backward())
        y = gradlib.mul_add(a, b, c)
        first = _outcome(lambda: y.sum().backward(retain_graph=program == "twice_retained"))
        if program == "no_line":
            return first, a.grad is not None, b.grad is not None, c.grad is None
        return first, _outcome(lambda: y.sum().backward())

    with session:
        on_daemon = run("cpu")
    assert run("meta") == on_daemon
    if program == "no_line":
        assert on_daemon[1:] == (True, True, True)
    if program == "twice":
        assert "backward through the graph a second time" in on_daemon[1][1]
    if program == "inplace_read":
        assert "modified by an inplace operation" in on_daemon[1]
    if program == "inplace_unread":
        assert on_daemon[0] == "ok"
    if program == "reads_none":
        assert on_daemon == ("RuntimeError", "gradlib::opt_scale: the derivative reads argument 'w', which is None in "
                                             "this call")


def test_define_with_a_derivative_on_meta():
    op = tensord.library.define("dlib::cube", "(Tensor x) -> Tensor", like="exp", derivative="x: grad * 3 * x * x")
    x = tensord.empty(4, device="meta", requires_grad=True)
    y = op(x)
    assert y.requires_grad and y.grad_fn.name() == "CubeBackward0"
    y.sum().backward()
    assert x.grad.shape == (4,)
    with pytest.raises(RuntimeError, match=r"library.define\(dlib::bad\): derivative line 2, column 1: 'z' is not an "
                                           r"argument"):
        tensord.library.define("dlib::bad", "(Tensor x) -> Tensor", like="exp", derivative="x: grad\nz: grad")
    with pytest.raises(RuntimeError, match=r"no overload of 'mul' takes \(Tensor, str\)"):
        tensord.library.define("dlib::bad2", "(Tensor x) -> Tensor", like="exp", derivative="x: mul(grad, 'a')")
    with pytest.raises(ValueError, match=r"derivative is not valid Unicode text \(character '\\udcff' at 8\)"):
        tensord.library.define("dlib::bad4", "(Tensor x) -> Tensor", like="exp", derivative="x: grad \udcff")
    with pytest.raises(RuntimeError, match="derivative line 1, column 11: unexpected character byte 0xC3"):
        tensord.library.define("dlib::bad5", "(Tensor x) -> Tensor", like="exp", derivative="x: grad * \u00e9")
    with pytest.raises(TypeError, match="derivative must be a str"):
        tensord.library.define("dlib::bad3", "(Tensor x) -> Tensor", like="exp", derivative=3)
    no_derivative = tensord.library.define("dlib::nod", "(Tensor x) -> Tensor", like="exp")
    y = no_derivative(tensord.empty(2, device="meta", requires_grad=True))
    with pytest.raises(NotImplementedError, match="the derivative for 'dlib::nod' is not implemented"):
        y.sum().backward()


def test_build_kernel_refuses_a_derivative_that_calls_an_op_outside_the_library(tmp_path):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary")
    src = KERNELS.replace("gradlib", "badlib").replace('"x: grad * x * (2 * s)"', '"x: badlib::nope(grad)"')
    (tmp_path / "badlib.cc").write_text(src)
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(tmp_path / "badlib.tdk"), str(tmp_path / "badlib.cc")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "the derivative of 'badlib::scale_sq' calls 'badlib::nope', which is not an op of library 'badlib'" in r.stderr
    src = KERNELS.replace("gradlib", "badlib").replace('"x: grad * x * (2 * s)"', '"x: grad *"')
    (tmp_path / "badlib.cc").write_text(src)
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(tmp_path / "badlib.tdk"), str(tmp_path / "badlib.cc")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "derivative line 1, column 10" in r.stderr


def test_opcheck_checks_artifact_ops(libs, session):
    gradlib, gelulib = libs
    ok = {"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS", "test_faketensor": "SUCCESS"}
    with session:
        tensord.manual_seed(2)
        x = tensord.randn(3, 4, requires_grad=True)
        b = tensord.randn(4, requires_grad=True)
        assert tensord.library.opcheck(gelulib.fused_bias_gelu, (x, b)) == ok
        assert tensord.library.opcheck("gradlib::mul_add", (x, x * 2, x.detach())) == ok
        # A float32-only kernel: gradcheck in float32.
        assert tensord.library.opcheck(gradlib.twice32, (x,)) == ok
        # A wrong derivative fails gradcheck.
        with pytest.raises(RuntimeError, match=r"opcheck\(gradlib::scale_sq_wrong\): test_autograd_registration: the "
                                               r"derivative of \['x'\] does not match finite differences: Jacobian "
                                               r"mismatch"):
            tensord.library.opcheck(gradlib.scale_sq_wrong, (x, 1.5))
        res = tensord.library.opcheck(gradlib.scale_sq_wrong, (x, 1.5), raise_exception=False)
        assert res["test_schema"] == "SUCCESS" and res["test_autograd_registration"] != "SUCCESS"
        # An input that requires grad through an op without a derivative.
        nod = tensord.library.define("gradlib_nod::f", "(Tensor x) -> Tensor", like="exp")
        res = tensord.library.opcheck(nod, (tensord.empty(2, device="meta", requires_grad=True),),
                                      test_utils="test_autograd_registration", raise_exception=False)
        assert "no derivative is registered" in str(res["test_autograd_registration"])
    with pytest.raises(ValueError, match="is not an op made by"):
        tensord.library.opcheck("gradlib::nope", (x,))


CHECK = """
import sys
import tensord
lib = tensord.library.load(sys.argv[1])
tensord.connect()  # an embedded daemon
x = tensord.randn(3, 4, dtype=tensord.float64, requires_grad=True)
for op in sys.argv[2:] or lib.ops:
    tensord.library.opcheck(op, (x, 1.5))
print("checked", lib.name)
"""


def test_build_kernel_runs_a_check_before_writing(tmp_path):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary")
    src = KERNELS.replace("gradlib", "chklib")
    (tmp_path / "chklib.cc").write_text(src)
    script = tmp_path / "check.py"
    out = tmp_path / "chklib.tdk"
    env = subprocess_env()
    env.pop("TENSORD_ADDRESS", None)
    # Only the op with the right derivative: the check passes and OUT is written.
    script.write_text(CHECK.replace("sys.argv[2:] or lib.ops", "['chklib::scale_sq']"))
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(out), "--check", str(script), str(tmp_path / "chklib.cc")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "checked chklib" in r.stdout and out.exists()
    before = out.read_bytes()
    # The wrong derivative: the check fails, and OUT stays as it was.
    script.write_text(CHECK.replace("sys.argv[2:] or lib.ops", "['chklib::scale_sq_wrong']"))
    (tmp_path / "chklib.cc").write_text(src + "\n// changed\n")
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(out), "--check", str(script), str(tmp_path / "chklib.cc")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1
    assert "Jacobian mismatch" in r.stderr
    assert "the check failed (" in r.stderr and "was not written" in r.stderr
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if "checking" in p.name] == []
    # A check that does not end: killed at --check-timeout, and OUT stays as it was.
    script.write_text("import time\ntime.sleep(600)\n")
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(out), "--check", str(script), "--check-timeout", "2",
                        str(tmp_path / "chklib.cc")], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1 and "ran past --check-timeout 2 s" in r.stderr, r.stderr
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if "checking" in p.name] == []


def test_a_session_closing_does_not_unload_what_another_still_uses(libs):
    """Two sessions run one artifact; the first closes (its last user could
    unload the object), while the second's graph still holds a node whose
    derivative calls the library's backward kernel: the backward runs."""
    _, gelulib = libs
    d = Daemon(DAEMON_BIN, extra_args=["--artifacts", "any"])
    try:
        a = tensord.connect(d.address, set_default=False)
        b = tensord.connect(d.address, set_default=False)
        with a:
            gelulib.fused_bias_gelu(tensord.ones(2, 3), tensord.ones(3)).numpy()
        with b:
            x = tensord.ones(2, 3, requires_grad=True)
            y = gelulib.fused_bias_gelu(x, tensord.zeros(3))
        a.close()
        with b:
            y.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 1.0833155, np.float32), rtol=1e-6)
            np.testing.assert_allclose(y.detach().numpy(), np.full((2, 3), 0.8413447, np.float32), rtol=1e-6)
        b.close()
    finally:
        d.stop()


def test_none_in_a_tensor_list_names_the_element():
    with pytest.raises(TypeError, match=r"cat\(\): expected Tensor as element 1 in argument 'tensors', but got None"):
        tensord.cat([tensord.empty(2, device="meta"), None])
