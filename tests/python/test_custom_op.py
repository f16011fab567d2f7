"""Python custom ops: tensord.library.custom_op with register_fake,
register_autograd and register_kernel, as torch.library's. Ops are the
process's, so each test uses a namespace of its own."""
from typing import Optional, Sequence

import numpy as np
import pytest

import tensord
import tensord.nn.functional as F
from tensord import Tensor
from tensord.autograd.gradcheck import GradcheckError

from conftest import run_tensord_check


def _gelu_backward(ctx, grad):
    x, bias = ctx.saved_tensors
    z = x + bias
    cdf = 0.5 * (1 + tensord.erf(z / 2 ** 0.5))
    pdf = tensord.exp(-0.5 * z * z) / (2 * np.pi) ** 0.5
    gz = grad * ctx.scale * (cdf + z * pdf)
    return gz, gz.sum(0), None


def _gelu_setup(ctx, inputs, output):
    x, bias, scale = inputs
    ctx.save_for_backward(x, bias)
    ctx.scale = scale


def test_a_function_becomes_an_op_with_its_schema_inferred(session):
    @tensord.library.custom_op("co_basic::bias_gelu", mutates_args=())
    def bias_gelu(x: Tensor, bias: Tensor, scale: float = 1.0) -> Tensor:
        return F.gelu(x + bias) * scale

    assert isinstance(bias_gelu, tensord.library.CustomOpDef)
    assert bias_gelu._name == "co_basic::bias_gelu" and bias_gelu.__name__ == "bias_gelu"
    assert bias_gelu._schema == "(Tensor x, Tensor bias, float scale=1.0) -> Tensor"
    assert tensord.ops.co_basic.bias_gelu is bias_gelu
    assert "bias_gelu" in dir(tensord.ops.co_basic) and "co_basic" in dir(tensord.ops)
    x, b = tensord.randn(4, 3), tensord.randn(3)
    want = (F.gelu(x + b) * 2).numpy()
    np.testing.assert_array_equal(bias_gelu(x, b, 2.0).numpy(), want)
    np.testing.assert_array_equal(bias_gelu(bias=b, x=x, scale=2.0).numpy(), want)   # keywords
    np.testing.assert_array_equal(bias_gelu(x, b).numpy(), F.gelu(x + b).numpy())    # the default
    with pytest.raises(TypeError, match="co_basic::bias_gelu"):
        bias_gelu(x)
    with pytest.raises(TypeError, match="co_basic::bias_gelu"):
        bias_gelu(x, b, 1.0, 2.0)


def test_schemas_of_every_supported_annotation(session):
    @tensord.library.custom_op("co_schema::many", mutates_args=())
    def many(x: Tensor, opt: Optional[Tensor], ts: Sequence[Tensor], n: int, ns: list[int], f: float, flag: bool,
             mode: str, dt: Optional[tensord.dtype] = None, *, k: int = 2) -> tuple[Tensor, Tensor]:
        return x.clone(), x * n

    assert many._schema == ("(Tensor x, Tensor? opt, Tensor[] ts, int n, int[] ns, float f, bool flag, str mode, "
                            "ScalarType? dt=None, *, int k=2) -> (Tensor, Tensor)")
    a, b = many(tensord.ones(2), None, [tensord.ones(1)], 3, [1], 0.5, True, "x")
    assert b.tolist() == [3.0, 3.0] and a.tolist() == [1.0, 1.0]

    with pytest.raises(ValueError, match=r"custom_op\(co_schema::bad\): parameter x must have a type annotation"):
        tensord.library.custom_op("co_schema::bad", lambda x: x, mutates_args=())
    with pytest.raises(ValueError, match=r"parameter x has unsupported type .*dict"):
        @tensord.library.custom_op("co_schema::bad2", mutates_args=())
        def bad2(x: dict) -> Tensor:
            return None
    with pytest.raises(ValueError, match="must have a return annotation"):
        @tensord.library.custom_op("co_schema::bad3", mutates_args=())
        def bad3(x: Tensor):
            return x
    with pytest.raises(ValueError, match=r"\*args or \*\*kwargs"):
        @tensord.library.custom_op("co_schema::bad4", mutates_args=())
        def bad4(*xs: Tensor) -> Tensor:
            return xs[0]


def test_names_are_checked_as_torch_library_checks_them(session):
    def f(x: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(ValueError, match="Expected there to be a namespace in nonamespace"):
        tensord.library.custom_op("nonamespace", f, mutates_args=())
    with pytest.raises(ValueError, match="the namespace 'aten' is tensord's own"):
        tensord.library.custom_op("aten::mine", f, mutates_args=())
    with pytest.raises(ValueError, match="must be identifiers"):
        tensord.library.custom_op("co_names::not-a-name", f, mutates_args=())
    tensord.library.custom_op("co_names::f", f, mutates_args=())
    with pytest.raises(RuntimeError, match="an op named co_names::f already exists"):
        tensord.library.custom_op("co_names::f", f, mutates_args=())
    tensord.library.define("co_names::defined", "(Tensor x) -> Tensor", like="neg")
    with pytest.raises(RuntimeError, match="an op named co_names::defined already exists"):
        tensord.library.custom_op("co_names::defined", f, mutates_args=())
    with pytest.raises(ValueError, match="mutates_args must be an iterable"):
        tensord.library.custom_op("co_names::g", f, mutates_args="x")
    with pytest.raises(ValueError, match=r"mutates_args names \['y'\], which are not parameters"):
        tensord.library.custom_op("co_names::h", f, mutates_args=("y",))


def test_meta_tensors_use_the_fake_else_the_body(session):
    calls = []

    @tensord.library.custom_op("co_meta::pairs", mutates_args=())
    def pairs(x: Tensor, n: int) -> Tensor:
        calls.append("body")
        return x.reshape(-1, n).sum(1)

    m = tensord.empty(6, 4, device="meta")
    out = pairs(m, 2)                                # no fake: the body runs on meta
    assert out.shape == (12,) and out.device.type == "meta" and calls == ["body"]

    @pairs.register_fake
    def _(x, n):
        calls.append("fake")
        return tensord.empty(x.numel() // n, device=x.device)

    assert pairs(m, 3).shape == (8,) and calls == ["body", "fake"]
    assert pairs(tensord.arange(6.0), 2).tolist() == [1.0, 5.0, 9.0]     # real tensors: the body
    assert calls[-1] == "body"

    @tensord.library.custom_op("co_meta::via_numpy", mutates_args=())
    def via_numpy(x: Tensor) -> Tensor:
        return tensord.from_numpy(np.sin(x.numpy()))

    with pytest.raises(RuntimeError, match="co_meta::via_numpy: no fake implementation is registered"):
        via_numpy(tensord.empty(3, device="meta"))
    tensord.library.register_fake("co_meta::via_numpy", lambda x: tensord.empty_like(x))
    assert via_numpy(tensord.empty(3, device="meta")).shape == (3,)
    np.testing.assert_allclose(via_numpy(tensord.tensor([0.5])).numpy(), np.sin([0.5]).astype(np.float32))


def test_the_registered_derivative_is_the_ops_and_gradcheck_passes(session):
    @tensord.library.custom_op("co_grad::bias_gelu", mutates_args=())
    def bias_gelu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
        return F.gelu(x + bias) * scale

    x = tensord.randn(5, 3, dtype=tensord.float64, requires_grad=True)
    b = tensord.randn(3, dtype=tensord.float64, requires_grad=True)
    y = bias_gelu(x, b, 2.0)
    assert y.requires_grad and y.grad_fn is not None
    with pytest.raises(RuntimeError, match="Autograd has not been implemented for operator co_grad::bias_gelu"):
        y.sum().backward()

    tensord.library.register_autograd("co_grad::bias_gelu", _gelu_backward, setup_context=_gelu_setup)
    assert tensord.autograd.gradcheck(lambda a, c: bias_gelu(a, c, 2.0), (x, b))
    y = bias_gelu(x, b, 2.0)
    y.sum().backward()
    # The same gradients as autograd through the body's own ops.
    x2, b2 = x.detach().requires_grad_(), b.detach().requires_grad_()
    (F.gelu(x2 + b2) * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(b.grad.numpy(), b2.grad.numpy(), rtol=1e-10)
    # No grad mode, or no input needing grad: no node.
    with tensord.no_grad():
        assert bias_gelu(x, b, 1.0).grad_fn is None
    assert bias_gelu(x.detach(), b.detach(), 1.0).grad_fn is None

    def wrong_count(ctx, grad):
        return grad,

    bias_gelu.register_autograd(wrong_count, setup_context=_gelu_setup)
    with pytest.raises(RuntimeError, match="returned 1 gradient"):
        bias_gelu(x, b, 1.0).sum().backward()


def test_ops_that_mutate_their_arguments(session):
    @tensord.library.custom_op("co_mut::scale_", mutates_args=("x",))
    def scale_(x: Tensor, s: float) -> None:
        x.mul_(s)

    assert scale_._schema == "(Tensor(a0!) x, float s) -> ()"
    t = tensord.ones(3)
    assert scale_(t, 4.0) is None
    assert t.tolist() == [4.0, 4.0, 4.0]
    with pytest.raises(RuntimeError, match="autograd is not supported for an op that mutates"):
        scale_.register_autograd(_gelu_backward)
    with pytest.raises(ValueError, match="mutates_args names n, which is a int, not a Tensor"):
        @tensord.library.custom_op("co_mut::bad", mutates_args=("n",))
        def bad(x: Tensor, n: int) -> None:
            pass


def test_outputs_must_be_new_tensors_of_the_schemas_count(session):
    @tensord.library.custom_op("co_out::ident", mutates_args=())
    def ident(x: Tensor) -> Tensor:
        return x

    with pytest.raises(RuntimeError, match="co_out::ident: the implementation returned one of its inputs"):
        ident(tensord.ones(2))

    @tensord.library.custom_op("co_out::two", mutates_args=())
    def two(x: Tensor) -> tuple[Tensor, Tensor]:
        return x.clone()

    with pytest.raises(RuntimeError, match=r"co_out::two: the implementation must return 2 Tensor\(s\)"):
        two(tensord.ones(2))


def test_kernels_per_device_type(session):
    @tensord.library.custom_op("co_dev::twice", mutates_args=(), device_types="cuda")
    def twice(x: Tensor) -> Tensor:
        return x * 2

    with pytest.raises(NotImplementedError, match="co_dev::twice: no implementation for device type 'cpu'"):
        twice(tensord.ones(2))

    @twice.register_kernel("cpu")
    def _(x):
        return x + x + 1

    assert twice(tensord.ones(2)).tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        twice.register_kernel("tpu", lambda x: x)


def test_tensord_check_validates_a_program_using_a_custom_op(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(
        "import tensord\n"
        "from tensord import Tensor\n"
        "@tensord.library.custom_op('co_check::rows', mutates_args=())\n"
        "def rows(x: Tensor, w: Tensor) -> Tensor:\n"
        "    return x @ w\n"
        "ok = rows(tensord.randn(8, 16), tensord.randn(16, 4))\n"
        "print('shape', tuple(ok.shape))\n"
        "bad = rows(tensord.randn(8, 16), tensord.randn(15, 4))\n")
    proc = run_tensord_check(script)
    assert proc.returncode == 1, proc.stderr
    assert "shape (8, 4)" in proc.stdout
    assert f"{script}:8:" in proc.stderr and "size mismatch" in proc.stderr, proc.stderr


def test_opcheck_passes_a_correct_op_and_names_what_is_wrong(session):
    @tensord.library.custom_op("co_opcheck::bias_gelu", mutates_args=())
    def bias_gelu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
        return F.gelu(x + bias) * scale

    bias_gelu.register_autograd(_gelu_backward, setup_context=_gelu_setup)
    x = tensord.randn(4, 3, requires_grad=True)
    b = tensord.randn(3, requires_grad=True)
    assert tensord.library.opcheck(bias_gelu, (x, b, 2.0)) == {
        "test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS", "test_faketensor": "SUCCESS"}
    # The same op on a permuted input: the body keeps the layout, a fake that does not is caught.
    xt = tensord.randn(3, 4).t()
    bias_gelu.register_fake(lambda x, bias, scale: tensord.empty(x.shape, device=x.device))
    r = tensord.library.opcheck(bias_gelu, (xt, b.detach(), 1.0), raise_exception=False)
    assert r["test_schema"] == "SUCCESS" and r["test_autograd_registration"] == "SUCCESS"
    assert isinstance(r["test_faketensor"], RuntimeError)
    assert "output 0's strides on meta are (3, 1), the real output's are (1, 4)" in str(r["test_faketensor"])

    # A wrong derivative fails gradcheck.
    @tensord.library.custom_op("co_opcheck::square", mutates_args=())
    def square(x: Tensor) -> Tensor:
        return x * x

    square.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0],
                             setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
    with pytest.raises(GradcheckError):
        tensord.library.opcheck(square, (tensord.randn(3, requires_grad=True),), test_utils="test_autograd_registration")

    # A derivative missing, and an undeclared write.
    @tensord.library.custom_op("co_opcheck::sneaky", mutates_args=())
    def sneaky(x: Tensor) -> Tensor:
        x.add_(1)
        return x * 2

    r = tensord.library.opcheck(sneaky, (tensord.randn(3, requires_grad=True),), raise_exception=False)
    assert "argument x was written to" in str(r["test_schema"])
    assert "no derivative is registered" in str(r["test_autograd_registration"])
    with pytest.raises(ValueError, match="unknown test_utils"):
        tensord.library.opcheck(sneaky, (tensord.ones(1),), test_utils=("test_aot_dispatch_dynamic",))
