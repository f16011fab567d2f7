"""gradcheck for every differentiable op of the table, over its OpInfo samples
(tests/python/opinfo.py) converted to float64, plus gradgradcheck (double
backward) on a set of formulas.

An op counts as differentiable when the table does not flag it
kNotDifferentiable and some argument is differentiable
(tensord/meta/autograd_rules.h, exported as op_table()["differentiable_args"]).
Floating tensor arguments in those positions require grad; the others are
passed as they are. A differentiable op without any sample that has a floating
differentiable input fails (so does an op whose derivative formula is missing:
its backward raises). Samples whose outputs are all integer or bool (e.g.
``to(int32)``) have nothing to check and are skipped visibly.
"""
import zlib

import numpy as np
import pytest

import tensord
from tensord import _C
from tensord.autograd import gradcheck, gradgradcheck

from opinfo import OPINFOS, Cast, D

ENTRIES = {e["full_name"]: e for e in _C.op_table()}


def _differentiable(entry):
    return not entry["not_differentiable"] and any(entry["differentiable_args"])


def _inplace(entry):
    return "Tensor(a!) self" in entry["schema"]


def _is_float_array(x):
    return isinstance(x, Cast) or (isinstance(x, np.ndarray) and x.dtype.kind == "f")


def _plan(entry, sample):
    """The sample as (positional, kwargs) templates: every floating array in a
    differentiable argument becomes a slot filled from gradcheck's inputs."""
    names = entry["arguments"]
    diff = dict(zip(names, entry["differentiable_args"]))
    slots = []

    def conv(x, differentiable):
        if _is_float_array(x):
            arr = x.array if isinstance(x, Cast) else x
            arr = np.asarray(arr, dtype=np.float64)
            if differentiable:
                slots.append(arr)
                return ("slot", len(slots) - 1)
            return ("const", arr)
        if isinstance(x, np.ndarray):
            return ("const", x)
        if isinstance(x, D):
            name = "float64" if x.name in ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2") \
                else x.name
            return ("value", getattr(tensord, name))
        if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast)) for e in x):
            return ("list", [("none", None) if e is None else conv(e, differentiable) for e in x])
        return ("value", x)

    pos = [conv(a, diff.get(names[i], False) if i < len(names) else False) for i, a in enumerate(sample.args)]
    kw = {k: conv(v, diff.get(k, False)) for k, v in sample.kwargs.items()}
    return pos, kw, slots


def _build(tmpl, inputs, device=None):
    """The argument `tmpl` describes: a gradcheck input, or a constant made on
    `device` (None: the cpu)."""
    kind, v = tmpl
    if kind == "slot":
        return inputs[v]
    if kind == "const":
        return tensord.from_numpy(v) if device is None else tensord.tensor(v, device=device)
    if kind == "list":
        return [_build(t, inputs, device) for t in v]
    if kind == "none":
        return None
    return v


def _cases():
    cases, missing = [], []
    for name, entry in ENTRIES.items():
        if not _differentiable(entry):
            continue
        infos = [i for i in OPINFOS if i.name == name]
        usable = 0
        for info in infos:
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            for k, sample in enumerate(info.samples(rng)):
                pos, kw, slots = _plan(entry, sample)
                if not slots or not all(np.isfinite(a).all() for a in slots):
                    continue  # nothing to differentiate, or NaN/inf where finite differences mean nothing
                usable += 1
                cases.append(pytest.param(name, pos, kw, slots, id=f"{name}-{k}"))
        if usable == 0:
            missing.append(name)
    return cases, missing


CASES, MISSING = _cases()


def _function(name, pos, kw, device=None):
    """The op as gradcheck's function of the sample's slots; its constant
    tensors are made on `device` (None: the cpu)."""
    entry = ENTRIES[name]
    inplace = _inplace(entry)
    random = entry["is_random"]

    def fn(*inputs):
        args = [_build(t, inputs, device) for t in pos]
        kwargs = {k: _build(t, inputs, device) for k, t in kw.items()}
        if inplace:
            args[0] = args[0].clone()   # never write into gradcheck's inputs (nor into a leaf)
        if random:
            tensord.manual_seed(0)      # the same draws in every evaluation
        return _C.call_any(name, *args, **kwargs)
    return fn


def test_every_differentiable_op_has_a_floating_sample():
    assert MISSING == [], ("differentiable ops without an OpInfo sample with a floating differentiable input "
                           f"(add one to its family's tests/python/opinfo_*.py): {MISSING}")


@pytest.mark.parametrize("name,pos,kw,slots", CASES)
def test_gradcheck(session, name, pos, kw, slots):
    inputs = tuple(tensord.from_numpy(a).requires_grad_() for a in slots)
    fn = _function(name, pos, kw)
    outs = fn(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    if not any(o.dtype.is_floating_point for o in outs):
        pytest.skip(f"{name}: this sample has no floating output")
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)


def _t(*shape, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return tensord.from_numpy(a).requires_grad_()


GRADGRAD = [
    ("exp", lambda x: x.exp(), lambda: (_t(4),)),
    ("mul", lambda a, b: a * b, lambda: (_t(3, 1, seed=1), _t(1, 4, seed=2))),
    ("div", lambda a, b: a / b, lambda: (_t(3, seed=3), _t(3, seed=4, positive=True))),
    ("matmul", lambda a, b: a @ b, lambda: (_t(2, 3, seed=5), _t(3, 2, seed=6))),
    ("sigmoid", lambda x: x.sigmoid(), lambda: (_t(5, seed=7),)),
    ("tanh", lambda x: x.tanh(), lambda: (_t(5, seed=8),)),
    ("log", lambda x: x.log(), lambda: (_t(4, seed=9, positive=True),)),
    ("pow", lambda x: x ** 3, lambda: (_t(4, seed=10),)),
    ("sum_mean", lambda x: (x * x).sum(1) + x.mean(), lambda: (_t(2, 3, seed=11),)),
    ("log_softmax", lambda x: x.log_softmax(1), lambda: (_t(2, 4, seed=12),)),
    ("addmm", lambda s, a, b: tensord.addmm(s, a, b, beta=0.5, alpha=2.0),
     lambda: (_t(3, seed=13), _t(2, 4, seed=14), _t(4, 3, seed=15))),
    ("linear", lambda x, w, b: tensord.nn.functional.linear(x, w, b),
     lambda: (_t(2, 2, 3, seed=16), _t(4, 3, seed=17), _t(4, seed=18))),
]


@pytest.mark.parametrize("name,fn,make", GRADGRAD, ids=[g[0] for g in GRADGRAD])
def test_gradgradcheck(session, name, fn, make):
    assert gradgradcheck(fn, make())


def test_gradgradcheck_of_a_scalar_loss():
    # 0-dim outputs (every loss) get 0-dim random grad_outputs.
    x = tensord.randn(2, 3, dtype=tensord.float64, requires_grad=True)
    assert tensord.autograd.gradgradcheck(lambda x: (x * x * x).sum(), (x,))


# ---- nn composites and pooling (tensord.nn.functional), float64 -----------------
def _nn_cases():
    import tensord.nn.functional as F
    # Constant tensors are made at call time, in the test's session, on the
    # default device (test_device_gradcheck.py runs these under `with tensord.device(...)`).
    def mask():
        return tensord.tensor(np.array([[True, False, True, True], [True, True, False, False],
                                        [False, True, True, True]]))

    def target():
        return tensord.tensor(np.array([0, 2, 1, 3, 1], dtype=np.int64))

    def weight():
        return tensord.tensor(np.array([0.5, 1.0, 2.0, 1.5]))
    return [
        ("conv2d_same", lambda x, w: F.conv2d(x, w, padding="same"), lambda: (_t(1, 2, 5, 5), _t(3, 2, 2, 3, seed=1))),
        ("conv2d_unbatched_groups", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
         lambda: (_t(4, 5, 5, seed=2), _t(4, 2, 3, 3, seed=3), _t(4, seed=4))),
        ("max_pool2d", lambda x: F.max_pool2d(x, 2, 1), lambda: (_t(1, 2, 4, 4, seed=5),)),
        ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         lambda: (_t(2, 5, 6, seed=6),)),
        ("rms_norm", lambda x, w: F.rms_norm(x, (4,), w), lambda: (_t(3, 4, seed=7), _t(4, seed=8))),
        ("rms_norm_2d_eps", lambda x: F.rms_norm(x, (3, 4), eps=1e-3), lambda: (_t(2, 3, 4, seed=9),)),
        ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
         lambda: (_t(2, 3, 4, seed=10), _t(2, 4, 4, seed=11), _t(2, 4, 2, seed=12))),
        ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.7),
         lambda: (_t(3, 4, seed=13), _t(5, 4, seed=14), _t(5, 3, seed=15))),
        ("sdpa_bool_mask", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask()),
         lambda: (_t(3, 2, seed=16), _t(4, 2, seed=17), _t(4, 2, seed=18))),
        ("sdpa_float_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
         lambda: (_t(3, 2, seed=19), _t(4, 2, seed=20), _t(4, 2, seed=21), _t(3, 4, seed=22))),
        ("cross_entropy_probs", lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1),
         lambda: (_t(5, 4, seed=23), _t(5, 4, seed=24, positive=True))),
        ("cross_entropy_probs_weight_none", lambda x, p: F.cross_entropy(x, p, weight(), reduction="none"),
         lambda: (_t(2, 4, 3, seed=25), _t(2, 4, 3, seed=26, positive=True))),
        ("cross_entropy_index_ls_weight",
         lambda x: F.cross_entropy(x, target(), weight(), ignore_index=1, label_smoothing=0.2),
         lambda: (_t(5, 4, seed=27),)),
    ]


NN_CASES = _nn_cases()


@pytest.mark.parametrize("name,fn,make", NN_CASES, ids=[c[0] for c in NN_CASES])
def test_gradcheck_nn_composites(session, name, fn, make):
    assert gradcheck(fn, make(), eps=1e-6, atol=1e-5, rtol=1e-3)


# The backward ops (convolution_backward, pooling backwards) are table ops with
# formulas: double backward works.
@pytest.mark.parametrize("name", ["max_pool2d", "avg_pool2d", "conv2d_same", "conv2d_unbatched_groups"])
def test_gradgradcheck_pooling(session, name):
    fn, make = {c[0]: (c[1], c[2]) for c in NN_CASES}[name]
    assert gradgradcheck(fn, make())
