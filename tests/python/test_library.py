"""Ops defined at run time: tensord.library.define and tensord.ops.<ns>.<name>.
The op set is the process's, so each test defines ops in a namespace of its
own."""
import numpy as np
import pytest

import tensord
from conftest import DAEMON_BIN, run_tensord_check


def test_a_defined_op_is_a_function_checked_by_its_shape_rule_on_meta():
    op = tensord.library.define("lib_meta::scale", "(Tensor x, Scalar s=1) -> Tensor", like="mul.Scalar")
    assert tensord.ops.lib_meta.scale is op
    assert op.__name__ == "scale" and "lib_meta::scale(Tensor x, Scalar s=1) -> Tensor" in op.__doc__
    x = tensord.empty(4, 3, device="meta", dtype=tensord.float16)
    y = op(x, 2.5)
    assert y.shape == (4, 3) and y.dtype == tensord.float16 and y.device.type == "meta"
    assert op(x).shape == (4, 3)                    # the default
    assert op(s=2, x=x).shape == (4, 3)             # keywords, by the schema's names
    with pytest.raises(TypeError, match="lib_meta::scale"):
        op(x, "two")
    add = tensord.library.define("lib_meta::bias_add", "(Tensor x, Tensor bias, Scalar alpha=1) -> Tensor",
                                 like="add.Tensor")
    assert add(x, tensord.empty(3, device="meta")).shape == (4, 3)
    with pytest.raises(RuntimeError, match=r"lib_meta::bias_add: The size of tensor a \(3\) must match the size "
                                           r"of tensor b \(5\)"):
        add(x, tensord.empty(5, device="meta"))
    # Not a method, and an unknown name says how to define one.
    assert not hasattr(x, "scale")
    with pytest.raises(AttributeError, match="'tensord.ops.lib_meta' has no op 'nope': define it"):
        tensord.ops.lib_meta.nope
    # A reserved namespace points at the built-in op instead of at define().
    with pytest.raises(AttributeError, match="built-in ops are tensord.<name>.*the namespace 'aten' is reserved"):
        tensord.ops.aten.add


def test_what_cannot_be_defined_is_refused_with_the_reason():
    with pytest.raises(RuntimeError, match="needs a namespace of its own, as in 'mylib::g'"):
        tensord.library.define("g", "(Tensor x) -> Tensor", like="neg")
    with pytest.raises(RuntimeError, match="the namespace 'aten' is tensord's own"):
        tensord.library.define("aten::g", "(Tensor x) -> Tensor", like="neg")
    with pytest.raises(RuntimeError, match="must have the types of the rule's op"):
        tensord.library.define("lib_refuse::g", "(Tensor x, Tensor y) -> Tensor", like="neg")
    with pytest.raises(RuntimeError, match="returns a view or writes in place"):
        tensord.library.define("lib_refuse::g", "(Tensor x, int dim) -> Tensor", like="squeeze.dim")
    with pytest.raises(RuntimeError, match="has an alias annotation"):
        tensord.library.define("lib_refuse::g", "(Tensor(a!) x) -> Tensor(a!)", like="neg")
    with pytest.raises(RuntimeError, match="which is no built-in op"):
        tensord.library.define("lib_refuse::g", "(Tensor x) -> Tensor", like="no_such_op")
    with pytest.raises(RuntimeError, match="schema must start with its arguments"):
        tensord.library.define("lib_refuse::g", "lib_refuse::g(Tensor x) -> Tensor", like="neg")
    with pytest.raises(TypeError, match="like must be a str"):
        tensord.library.define("lib_refuse::g", "(Tensor x) -> Tensor", like=tensord.neg)
    tensord.library.define("lib_refuse::g", "(Tensor x) -> Tensor", like="neg")
    with pytest.raises(RuntimeError, match="already defined"):
        tensord.library.define("lib_refuse::g", "(Tensor self) -> Tensor", like="neg")


def test_backward_through_a_defined_op_has_no_derivative():
    op = tensord.library.define("lib_grad::act", "(Tensor x, str approximate='none') -> Tensor", like="gelu")
    x = tensord.empty(3, device="meta", requires_grad=True)
    y = op(x)
    assert y.requires_grad and y.grad_fn.name() == "ActBackward0"
    with pytest.raises(NotImplementedError, match="the derivative for 'lib_grad::act' is not implemented"):
        y.sum().backward()


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_on_a_daemon_the_session_is_sent_the_ops_and_they_have_no_kernel(session):
    scale = tensord.library.define("lib_daemon::scale", "(Tensor x, Scalar s) -> Tensor", like="mul.Scalar")
    x = tensord.ones(2, 3)
    y = scale(x, 2.0)
    assert y.shape == (2, 3)                      # known at once, from the shape rule
    no_kernel = r" \(call \d+ at test_library.py:\d+\): no kernel for device cpu \(an op defined with tensord.library"
    with pytest.raises(NotImplementedError, match="lib_daemon::scale" + no_kernel):
        y.numpy()
    # An op defined later reaches the same session after the first (the
    # daemon checks the index and the digest: neither fails here).
    act = tensord.library.define("lib_daemon::act", "(Tensor x, str approximate='none') -> Tensor", like="gelu")
    z = act(x)
    with pytest.raises(NotImplementedError, match="lib_daemon::act" + no_kernel):
        z.numpy()
    # The session is unharmed.
    np.testing.assert_array_equal((x + 1).numpy(), np.full((2, 3), 2.0, np.float32))


def test_tensord_check_validates_a_program_using_a_defined_op(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(
        "import tensord\n"
        "fused = tensord.library.define('lib_check::fused', '(Tensor x, Tensor bias, Scalar alpha=1) -> Tensor',\n"
        "                               like='add.Tensor')\n"
        "x = tensord.randn(8, 16)\n"
        "ok = tensord.ops.lib_check.fused(x, tensord.zeros(16))\n"
        "print('shape', tuple(ok.shape))\n"
        "bad = tensord.ops.lib_check.fused(x, tensord.zeros(15))\n")
    proc = run_tensord_check(script)
    assert proc.returncode == 1, proc.stderr
    assert "shape (8, 16)" in proc.stdout
    assert f"{script}:7: RuntimeError: lib_check::fused: The size of tensor a (16) must match" in proc.stderr


def test_the_rule_behaves_as_its_op_and_factories_follow_the_device():
    avg = tensord.library.define("lib_rule::avg",
                                 "(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) "
                                 "-> Tensor", like="mean")
    ints = tensord.empty(3, 4, dtype=tensord.int64, device="meta")
    with pytest.raises(RuntimeError, match="lib_rule::avg: .*could not infer output dtype"):
        avg(ints)                                   # as tensord.mean(ints)
    assert avg(tensord.empty(3, 4, device="meta"), [1], True).shape == (3, 1)
    z = tensord.library.define("lib_rule::z", "(int[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
                               like="zeros")
    with tensord.device("meta"):
        assert z([2, 3]).device.type == "meta"
    fill = tensord.library.define("lib_rule::fill", "(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, "
                                  "Device? device=None) -> Tensor", like="full_like")
    assert fill(ints, 7).dtype == tensord.int64


def test_overloads_are_attributes_and_names_never_collide():
    a = tensord.library.define("lib_ov::f.a", "(Tensor x, Scalar s) -> Tensor", like="mul.Scalar")
    assert tensord.ops.lib_ov.f.a is a
    assert "lib_ov::f.a(Tensor x, Scalar s) -> Tensor" in tensord.ops.lib_ov.f.__doc__
    b = tensord.library.define("lib_ov::f.b", "(Tensor x, Tensor y, Scalar alpha=1) -> Tensor", like="add.Tensor")
    f = tensord.ops.lib_ov.f
    assert "lib_ov::f.b(" in f.__doc__                   # the doc follows a later overload
    x = tensord.empty(2, 3, device="meta")
    assert f(x, 2).shape == (2, 3) and f(x, x).shape == (2, 3)   # picked by the arguments
    assert f.b(x, x).shape == (2, 3) and b(x, x).shape == (2, 3)
    with pytest.raises(TypeError):
        f.a(x, x)
    plain = tensord.library.define("lib_ov::g", "(Tensor x) -> Tensor", like="neg")
    assert tensord.ops.lib_ov.g.default(x).shape == (2, 3) and plain(x).shape == (2, 3)
    # Ops and namespaces named like the module's internals are still ops.
    for name in ("_ops", "_ns", "_make", "_C"):
        op = tensord.library.define(f"lib_ov::{name}", "(Tensor x) -> Tensor", like="neg")
        assert getattr(tensord.ops.lib_ov, name) is op
    op = tensord.library.define("_C::neg2", "(Tensor x) -> Tensor", like="neg")
    assert tensord.ops._C.neg2 is op
    # dir() lists what is defined (tab completion), each name once.
    assert {"f", "g", "_ops", "_ns", "_make", "_C"} <= set(dir(tensord.ops.lib_ov))
    assert dir(tensord.ops.lib_ov).count("f") == 1
    assert {"lib_ov", "_C"} <= set(dir(tensord.ops))
    with pytest.raises(RuntimeError, match="names starting with '__' are Python's"):
        tensord.library.define("lib_ov::__call__", "(Tensor x) -> Tensor", like="neg")
    with pytest.raises(RuntimeError, match="the overload 'default' names the op without an overload"):
        tensord.library.define("lib_ov::h.default", "(Tensor x) -> Tensor", like="neg")


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_a_string_default_with_a_quote_reaches_the_daemon_intact(session):
    q = tensord.library.define("lib_quote::op", "(Tensor self, *, str approximate='x\",y') -> Tensor", like="gelu")
    g = tensord.library.define("lib_quote::g", "(Tensor x) -> Tensor", like="neg")
    x = tensord.ones(3)
    y = q(x, approximate="none")
    z = g(x)
    # Each fails only for want of a kernel: the daemon took both definitions.
    for t, name in ((y, "lib_quote::op"), (z, "lib_quote::g")):
        with pytest.raises(NotImplementedError, match=name + r" \(call \d+ at test_library.py:\d+\): no kernel"):
            t.numpy()


def test_oversized_definitions_are_refused_at_define():
    pad = "x" * (20 << 10)
    with pytest.raises(RuntimeError, match="a schema of 2"):
        tensord.library.define("lib_big::g", f"(Tensor self, *, str approximate='{pad}') -> Tensor", like="gelu")


def test_a_declared_shape_rule_checks_and_shapes_on_meta():
    fused = tensord.library.define("lib_rule_text::fused_bias_gelu", "(Tensor x, Tensor bias) -> Tensor", rule="""
        # the bias is one row of x
        check bias.dim() == 1 and bias.size(0) == x.size(-1), "bias must be [{x.size(-1)}], got {bias.shape}"
        return empty(broadcast(x, bias), dtype=promote(x, bias), layout=like(x))
    """)
    assert tensord.ops.lib_rule_text.fused_bias_gelu is fused
    x = tensord.empty(16, 8, device="meta").t()
    y = fused(x, tensord.empty(16, device="meta", dtype=tensord.float64))
    assert y.shape == (8, 16) and y.stride() == (1, 8) and y.dtype == tensord.float64 and y.device.type == "meta"
    with pytest.raises(RuntimeError, match=r"lib_rule_text::fused_bias_gelu: bias must be \[16\], got \[15\]"):
        fused(x, tensord.empty(15, device="meta"))
    with pytest.raises(IndexError, match=r"Dimension out of range"):
        tensord.library.define("lib_rule_text::first", "(Tensor x, int d) -> Tensor",
                               rule="return empty([x.size(d)])")(x, 7)
    # A rule that does not compile names its line and column; exactly one rule.
    with pytest.raises(RuntimeError, match=r"library.define\(lib_rule_text::bad\): shape rule line 2, column 14: "
                                           r"'y' is not an argument"):
        tensord.library.define("lib_rule_text::bad", "(Tensor x) -> Tensor", rule="n = 1\nreturn empty(y.shape)")
    with pytest.raises(ValueError, match="exactly one shape rule"):
        tensord.library.define("lib_rule_text::none", "(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="exactly one shape rule"):
        tensord.library.define("lib_rule_text::both", "(Tensor x) -> Tensor", like="neg", rule="return empty(x.shape)")
    with pytest.raises(TypeError, match="rule must be a str"):
        tensord.library.define("lib_rule_text::typed", "(Tensor x) -> Tensor", rule=3)


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_a_declared_rule_travels_to_the_daemon(session):
    op = tensord.library.define("lib_rule_daemon::rows", "(Tensor x, int n) -> (Tensor, Tensor)", rule="""
        check x.numel() % n == 0, "{x.numel()} elements do not make rows of {n}"
        return empty([x.numel() // n, n]), empty([x.numel() // n], dtype=int64)
    """)
    x = tensord.ones(4, 3)
    a, b = op(x, 6)
    assert a.shape == (2, 6) and b.shape == (2,) and b.dtype == tensord.int64
    # The daemon compiled the same rule (the digests agree) and has no kernel for it.
    with pytest.raises(NotImplementedError, match="lib_rule_daemon::rows .*no kernel for device cpu"):
        a.numpy()
    with pytest.raises(RuntimeError, match="12 elements do not make rows of 5"):
        op(x, 5)
    np.testing.assert_array_equal((x + 1).numpy(), np.full((4, 3), 2.0, np.float32))
