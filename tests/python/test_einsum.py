"""tensord.einsum against torch.einsum (PyTorch 1.13): values on the daemon,
shapes and dtypes on meta (no daemon), errors (RuntimeError naming einsum and
the equation), and gradients through the composed table ops."""
import numpy as np
import pytest
import torch

import tensord

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),                     # implicit output
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,i->", [(5,), (5,)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),                                # implicit: alphabetical, so a transpose
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),                                # trace
    ("iij->ji", [(3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,ji", [(3, 4), (4, 3)]),
    ("ij,jk->i", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 1), (3, 4)]),                     # size-1 label broadcasts
    ("bij,jk->bik", [(1, 2, 3), (3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),  # three operands
    ("Ba,aB", [(2, 3), (3, 2)]),                     # uppercase labels
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),     # ellipsis broadcasting
    ("...ij,...jk", [(5, 1, 2, 3), (6, 3, 4)]),
    ("...ij->ij", [(2, 3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("b...d,b...d->b...", [(2, 3, 4), (2, 3, 4)]),
    ("ij->...", [(2, 3)]),                           # an empty ellipsis
    ("ij,jk->ik", [(0, 3), (3, 4)]),                  # size 0
    ("ij,jk->ik", [(2, 0), (0, 4)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),          # spaces are ignored
]


def _arrays(shapes, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0].replace(" ", "_") for c in CASES])
def test_values_match_torch(session, eq, shapes):
    arrs = _arrays(shapes, len(eq))
    ref = torch.einsum(eq, *[torch.from_numpy(a) for a in arrs])
    out = tensord.einsum(eq, *[tensord.from_numpy(a) for a in arrs])
    assert list(out.shape) == list(ref.shape)
    assert out.dtype == tensord.float64
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0].replace(" ", "_") for c in CASES])
def test_meta_shapes_match_torch(eq, shapes):
    ref = torch.einsum(eq, *[torch.empty(s, device="meta") for s in shapes])
    with tensord.device("meta"):
        out = tensord.einsum(eq, *[tensord.empty(*s) for s in shapes])
    assert out.is_meta
    assert list(out.shape) == list(ref.shape)
    assert out.dtype == tensord.float32


def test_operands_as_a_list_and_integer_dtypes(session):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = tensord.einsum("ij,jk->ik", [tensord.from_numpy(a), tensord.from_numpy(b)])
    assert out.dtype == tensord.int64
    np.testing.assert_array_equal(out.numpy(), a @ b)
    x = np.arange(9, dtype=np.int32).reshape(3, 3)
    t = tensord.einsum("ij->i", tensord.from_numpy(x))
    np.testing.assert_array_equal(t.numpy(), x.sum(1))


INT_CASES = [
    ("ij->i", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij,ij->", [(2, 3), (2, 3)]),
    ("ij,ij->i", [(2, 3), (2, 3)]), ("i,j->", [(2,), (3,)]), ("ij,j->ij", [(2, 3), (3,)]),
    ("ij,jk->", [(2, 3), (3, 4)]), ("ij,jk->ik", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", INT_CASES, ids=[c[0] for c in INT_CASES])
@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_integer_and_bool_dtypes_follow_torch(session, eq, shapes, dtype):
    rng = np.random.default_rng(3)
    arrs = [rng.integers(0, 2, s).astype(dtype) for s in shapes]
    try:
        ref = torch.einsum(eq, *[torch.from_numpy(a) for a in arrs])
    except RuntimeError:
        with pytest.raises(RuntimeError, match="einsum"):
            tensord.einsum(eq, *[tensord.from_numpy(a) for a in arrs])
        return
    out = tensord.einsum(eq, *[tensord.from_numpy(a) for a in arrs])
    assert out.dtype._name == str(ref.dtype).replace("torch.", "")
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_dtypes_follow_torch(session):
    f32 = np.ones(3, dtype=np.float32)
    f64 = np.ones(3)
    out = tensord.einsum("i,i->i", tensord.from_numpy(f32), tensord.from_numpy(f64))   # a multiply: promotes
    assert out.dtype == tensord.float64
    assert torch.einsum("i,i->i", torch.from_numpy(f32), torch.from_numpy(f64)).dtype == torch.float64
    b = tensord.from_numpy(np.array([True, False, True]))
    assert tensord.einsum("i,i->i", b, b).dtype == tensord.bool
    with pytest.raises(RuntimeError, match=r"einsum\(\): expected scalar type float32 but found float64.*'ij,jk'"):
        tensord.einsum("ij,jk", tensord.ones(2, 3), tensord.ones(3, 2, dtype=tensord.float64))
    with pytest.raises(RuntimeError, match="einsum.*Bool"):
        tensord.einsum("i,i", b, b)


def test_transpose_is_a_view(session):
    x = tensord.randn(3, 4)
    y = tensord.einsum("ij->ji", x)
    assert y is not x and list(y.shape) == [4, 3] and y.stride() == (1, 4)


@pytest.mark.parametrize("eq,shape", [("ii->i", (3, 3)), ("bii->bi", (2, 3, 3)), ("iij->ji", (3, 3, 2)),
                                      ("iji->ij", (3, 2, 3))])
def test_diagonal_is_a_view_with_torch_strides(session, eq, shape):
    x = tensord.randn(*shape)
    y = tensord.einsum(eq, x)
    ref = torch.einsum(eq, torch.zeros(shape))
    assert list(y.shape) == list(ref.shape) and y.stride() == ref.stride()
    assert y.storage_offset() == ref.storage_offset()
    y.mul_(0)                                   # writes through to x's diagonal
    np.testing.assert_array_equal(tensord.einsum(eq, x).numpy(), np.zeros(ref.shape))


def test_diagonal_keeps_non_finite_values_off_the_diagonal_out(session):
    x = np.array([[1.0, np.inf], [np.nan, 2.0]])
    np.testing.assert_array_equal(tensord.einsum("ii->i", tensord.from_numpy(x)).numpy(), [1.0, 2.0])


ERRORS = [
    ("ij,jk->ik", [(2, 3), (4, 5)], "subscript j has size"),
    ("ij->k", [(2, 3)], "output subscript k does not appear in the equation for any input operand"),
    ("ij->ii", [(2, 3)], "output subscript i appears more than once"),
    ("ij", [(2, 3, 4)], "the number of subscripts in the equation (2) does not match the number of dimensions (3) "
                        "for operand 0 and no ellipsis was given"),
    ("ij...", [(2,)], "is more than the number of dimensions (1) for operand 0"),
    ("i1", [(2, 3)], "invalid subscript given at index 1"),
    ("ij,jk", [(2, 3)], "fewer operands were provided than specified in the equation"),
    ("ij", [(2, 3), (3, 4)], "more operands were provided than specified in the equation"),
    ("ii->i", [(2, 3)], "subscript i is repeated for operand 0 but the sizes don't match, 2 != 3"),
    ("i......", [(2, 3)], "more than one ellipsis"),
]


@pytest.mark.parametrize("eq,shapes,match", ERRORS, ids=[e[0] + "-" + str(i) for i, e in enumerate(ERRORS)])
def test_errors_name_einsum_and_the_equation(eq, shapes, match):
    with pytest.raises(Exception):
        torch.einsum(eq, *[torch.empty(s) for s in shapes])
    with tensord.device("meta"):
        ops = [tensord.empty(*s) for s in shapes]
        with pytest.raises(RuntimeError) as e:
            tensord.einsum(eq, *ops)
    msg = str(e.value)
    assert msg.startswith("einsum(): ") and match in msg and f"'{eq}'" in msg


def test_type_errors():
    with pytest.raises(TypeError, match="einsum"):
        tensord.einsum("i,i", np.ones(3), np.ones(3))
    with pytest.raises(TypeError, match="equation"):
        tensord.einsum(3, tensord.empty(3, device="meta"))


def test_gradients_match_torch(session):
    arrs = _arrays([(2, 3, 4), (2, 4, 5)], 7)
    ta = [torch.from_numpy(a).requires_grad_() for a in arrs]
    torch.einsum("bij,bjk->bik", *ta).pow(2).sum().backward()
    ours = [tensord.from_numpy(a).requires_grad_() for a in arrs]
    (tensord.einsum("bij,bjk->bik", *ours) ** 2).sum().backward()
    for t, o in zip(ta, ours):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
