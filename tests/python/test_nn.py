"""tensord.nn: Module bookkeeping, Parameter, layers, functional and init, meta
construction, and gradients against PyTorch 1.13 (where python3-torch is
installed; those tests skip visibly otherwise)."""
import collections
import math

import numpy as np
import pytest

import tensord
import tensord.nn as nn
import tensord.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=64, d_hidden=128, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 4))
        self.norm = nn.LayerNorm(4)
        self.emb = nn.Embedding(10, 4, padding_idx=0)
        self.register_buffer("scale", tensord.ones(4))
        self.register_buffer("cache", tensord.zeros(2), persistent=False)

    def forward(self, idx):
        return self.norm(self.seq(self.emb(idx)) * self.scale)


def np_of(t):
    return t.detach().numpy() if hasattr(t, "detach") else t.numpy()


# ------------------------------------------------------------------ bookkeeping (meta: no daemon)

def test_registration_order_names_and_iteration():
    with tensord.device("meta"):
        m = Block()
    assert [n for n, _ in m.named_parameters()] == [
        "seq.0.weight", "seq.0.bias", "seq.3.weight", "seq.3.bias", "norm.weight", "norm.bias", "emb.weight"]
    assert all(isinstance(p, nn.Parameter) and p.is_meta for p in m.parameters())
    assert [n for n, _ in m.named_buffers()] == ["scale", "cache"]
    assert list(m.state_dict()) == [
        "scale", "seq.0.weight", "seq.0.bias", "seq.3.weight", "seq.3.bias", "norm.weight", "norm.bias", "emb.weight"]
    assert [n for n, _ in m.named_children()] == ["seq", "norm", "emb"]
    assert [n for n, _ in m.named_modules()] == ["", "seq", "seq.0", "seq.1", "seq.2", "seq.3", "norm", "emb"]
    assert len(list(m.modules())) == 8
    assert [n for n, _ in m.named_parameters(recurse=False)] == []
    assert m.seq[0].weight.shape == (8, 4) and m.seq[-1].bias.shape == (4,)
    assert isinstance(m.seq[1:3], nn.Sequential) and len(m.seq[1:3]) == 2
    with pytest.raises(IndexError):
        m.seq[4]


def test_shared_parameters_are_listed_once():
    with tensord.device("meta"):
        a = nn.Linear(3, 3)
        s = nn.Sequential(a, nn.ReLU(), a)
    assert len(list(s.parameters())) == 2
    assert len(list(s.modules())) == 3           # the Sequential, the Linear once, the ReLU


def test_setattr_rules():
    with tensord.device("meta"):
        m = nn.Linear(2, 3)
        with pytest.raises(TypeError, match="cannot assign"):
            m.weight = tensord.zeros(3, 2)                     # a plain Tensor where a Parameter lives
        m.weight = nn.Parameter(tensord.zeros(3, 2))
        assert isinstance(m.weight, nn.Parameter)
        m.bias = None
        assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]
        m.extra = nn.Parameter(tensord.zeros(1))
        assert [n for n, _ in m.named_parameters()] == ["weight", "extra"]
        del m.extra
        assert not hasattr(m, "extra")
        with pytest.raises(KeyError, match="already exists"):
            m.register_buffer("weight", tensord.zeros(1))
        with pytest.raises(KeyError, match='"."'):
            m.register_parameter("a.b", None)
        with pytest.raises(TypeError, match="Parameter or None"):
            m.register_parameter("p", tensord.zeros(1))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope

    class Early(nn.Module):
        def __init__(self):
            self.p = nn.Parameter(tensord.zeros(1, device="meta"))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_train_eval_and_apply():
    with tensord.device("meta"):
        m = Block()
    assert m.training and m.seq[2].training
    assert m.eval() is m
    assert not m.training and not m.seq[2].training
    m.train()
    assert all(x.training for x in m.modules())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "GELU", "Dropout", "Linear", "Sequential", "LayerNorm", "Embedding", "Block"]
    with pytest.raises(ValueError):
        m.train("yes")


def test_repr_matches_pytorch_layout():
    with tensord.device("meta"):
        m = Block()
    expected = """Block(
  (seq): Sequential(
    (0): Linear(in_features=4, out_features=8, bias=True)
    (1): GELU(approximate='none')
    (2): Dropout(p=0.1, inplace=False)
    (3): Linear(in_features=8, out_features=4, bias=True)
  )
  (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True)
  (emb): Embedding(10, 4, padding_idx=0)
)"""
    assert repr(m) == expected
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"
    assert repr(nn.Sigmoid()) == "Sigmoid()" and repr(nn.Tanh()) == "Tanh()"
    torch = pytest.importorskip("torch")
    tn = torch.nn

    class TBlock(tn.Module):
        def __init__(self):
            super().__init__()
            self.seq = tn.Sequential(tn.Linear(4, 8), tn.GELU(), tn.Dropout(0.1), tn.Linear(8, 4))
            self.norm = tn.LayerNorm(4)
            self.emb = tn.Embedding(10, 4, padding_idx=0)
    assert repr(TBlock()).replace("TBlock", "Block") == expected


def test_parameter_basics(session):
    t = tensord.randn(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, tensord.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert p.shape == (2, 3)
    np.testing.assert_array_equal(np_of(p), t.numpy())
    assert repr(p).startswith("Parameter containing:\ntensor(")
    q = nn.Parameter(t, requires_grad=False)
    assert not q.requires_grad
    y = p * 2
    assert type(y) is tensord.Tensor and y.requires_grad
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])


# ------------------------------------------------------------------ meta construction and to_empty

def test_module_construction_on_meta_prints_and_infers_shapes():
    with tensord.device("meta"):
        model = MLP()
        x = tensord.randn(32, 64)
        y = model(x)
        loss = F.cross_entropy(y, tensord.zeros(32, dtype=tensord.int64))
    assert all(p.is_meta for p in model.parameters())
    assert y.is_meta and y.shape == (32, 10)
    assert loss.is_meta and loss.shape == ()
    assert "Linear(in_features=64, out_features=128, bias=True)" in repr(model)
    assert "device='meta'" in repr(model.fc1.weight)


def test_to_empty_then_reset_parameters(session):
    tensord.manual_seed(1)
    with tensord.device("meta"):
        model = MLP()
    assert model.to_empty(device="cpu") is model
    params = dict(model.named_parameters())
    assert all(not p.is_meta and p.device == tensord.device("cpu") and p.requires_grad for p in params.values())
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.reset_parameters()
    w1 = np_of(model.fc1.weight)
    b1 = np_of(model.fc1.bias)
    assert np.all(np.abs(w1) <= 1 / 8) and np.all(np.abs(b1) <= 1 / 8)      # U(-1/sqrt(64), 1/sqrt(64))
    assert w1.std() > 0.05                                                     # actually random
    y = model(tensord.randn(5, 64))
    assert not y.is_meta and y.shape == (5, 10)
    assert np.all(np.isfinite(np_of(y)))


def test_to_empty_then_load_state_dict(session, tmp_path):
    tensord.manual_seed(2)
    real = MLP()
    path = tmp_path / "mlp.safetensors"
    tensord.save(real.state_dict(), path)
    with tensord.device("meta"):
        model = MLP()
    # The file's layout checks against the meta model without reading data.
    layout = tensord.load(path, map_location="meta")
    assert {k: tuple(v.shape) for k, v in layout.items()} == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    model.to_empty(device="cpu")
    result = model.load_state_dict(tensord.load(path))
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = tensord.randn(4, 64)
    np.testing.assert_array_equal(np_of(model(x)), np_of(real(x)))


def test_load_state_dict_errors(session):
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    with pytest.raises(RuntimeError, match=r'Error\(s\) in loading state_dict for Linear:\n\tMissing key\(s\) in '
                                           r'state_dict: "bias"\. '):
        m.load_state_dict({"weight": sd["weight"]})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"\.'):
        m.load_state_dict({**sd, "extra": tensord.zeros(1)})
    r = m.load_state_dict({"weight": sd["weight"], "extra": tensord.zeros(1)}, strict=False)
    assert r.missing_keys == ["bias"] and r.unexpected_keys == ["extra"]
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape "
                                           r"tensord.Size\(\[3, 3\]\) from checkpoint, the shape in current model "
                                           r"is tensord.Size\(\[2, 3\]\)"):
        m.load_state_dict({"weight": tensord.zeros(3, 3), "bias": sd["bias"]})


def test_load_state_dict_copies_values_and_converts_dtype(session):
    m = nn.Linear(2, 2)
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    m.load_state_dict({"weight": tensord.tensor(w, dtype=tensord.float64), "bias": tensord.tensor([0.5, -0.5])})
    assert m.weight.dtype is tensord.float32
    np.testing.assert_array_equal(np_of(m.weight), w.astype(np.float32))
    assert m.weight.requires_grad and m.weight.is_leaf


def test_state_dict_shares_data_and_is_detached(session):
    m = nn.Linear(2, 2)
    sd = m.state_dict()
    assert not sd["weight"].requires_grad
    with tensord.no_grad():
        m.weight.fill_(3.0)
    assert np.all(np_of(sd["weight"]) == 3.0)


def test_to_dtype_and_buffers(session):
    m = Block()
    m.to(tensord.float64)
    assert all(p.dtype is tensord.float64 for p in m.parameters())
    assert m.scale.dtype is tensord.float64
    assert all(p.requires_grad and isinstance(p, nn.Parameter) for p in m.parameters())
    with pytest.raises(TypeError, match="floating point"):
        m.to(tensord.int64)
    m.float()
    assert m.norm.weight.dtype is tensord.float32


def test_zero_grad(session):
    m = nn.Linear(3, 2)
    x = tensord.randn(4, 3)
    m(x).sum().backward()
    first = np_of(m.weight.grad).copy()
    assert np.any(first != 0)
    g = m.weight.grad
    m.zero_grad(set_to_none=False)                  # PyTorch 1.13's default
    assert m.weight.grad is g and np.all(np_of(m.weight.grad) == 0) and np.all(np_of(m.bias.grad) == 0)
    m(x).sum().backward()                           # accumulates into the zeroed grad
    np.testing.assert_array_equal(np_of(m.weight.grad), first)
    m.zero_grad()                                   # tensord's default, as PyTorch 2.0: set_to_none=True
    assert m.weight.grad is None and m.bias.grad is None
    m.zero_grad(set_to_none=False)                  # no grads: nothing to do
    assert m.weight.grad is None


# ------------------------------------------------------------------ init

def test_calculate_gain_and_fans():
    init = nn.init
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    w = tensord.empty(5, 3, 2, 2, device="meta")
    assert init._calculate_fan_in_and_fan_out(w) == (12, 20)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(tensord.empty(4, device="meta"))
    # On meta every initialiser is a no-op returning its argument.
    for fn in (init.kaiming_uniform_, init.xavier_uniform_, init.zeros_, init.ones_, init.normal_):
        assert fn(w) is w


def test_init_bounds_values_and_seeding(session):
    init = nn.init
    w = tensord.empty(200, 50)
    tensord.manual_seed(7)
    assert init.kaiming_uniform_(w, a=math.sqrt(5)) is w
    a = np_of(w).copy()
    bound = math.sqrt(3) * math.sqrt(2 / (1 + 5)) / math.sqrt(50)
    assert np.all(np.abs(a) <= bound) and np.abs(a).max() > 0.9 * bound
    tensord.manual_seed(7)
    init.kaiming_uniform_(w, a=math.sqrt(5))
    np.testing.assert_array_equal(np_of(w), a)                 # reproducible with manual_seed
    init.xavier_uniform_(w)
    xb = math.sqrt(6 / 250)
    assert np.all(np.abs(np_of(w)) <= xb) and np.abs(np_of(w)).max() > 0.9 * xb
    init.kaiming_normal_(w, nonlinearity="relu")
    assert np_of(w).std() == pytest.approx(math.sqrt(2 / 50), rel=0.05)
    init.xavier_normal_(w, gain=2.0)
    assert np_of(w).std() == pytest.approx(2 * math.sqrt(2 / 250), rel=0.05)
    init.normal_(w, 3.0, 0.5)
    assert np_of(w).mean() == pytest.approx(3.0, abs=0.02) and np_of(w).std() == pytest.approx(0.5, rel=0.05)
    init.uniform_(w, -2, -1)
    assert np_of(w).min() >= -2 and np_of(w).max() < -1
    init.constant_(w, 0.25)
    assert np.all(np_of(w) == 0.25)
    init.zeros_(w)
    assert np.all(np_of(w) == 0)
    init.ones_(w)
    assert np.all(np_of(w) == 1)
    # Initialising a parameter is not recorded by autograd.
    p = nn.Parameter(tensord.empty(3, 3))
    init.uniform_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_layer_initialisation(session):
    tensord.manual_seed(3)
    lin = nn.Linear(100, 400)
    b = 1 / 10
    assert np.all(np.abs(np_of(lin.weight)) <= b) and np.abs(np_of(lin.weight)).max() > 0.9 * b
    assert np.all(np.abs(np_of(lin.bias)) <= b)
    ln = nn.LayerNorm((3, 4))
    assert np.all(np_of(ln.weight) == 1) and np.all(np_of(ln.bias) == 0) and ln.weight.shape == (3, 4)
    emb = nn.Embedding(1000, 8, padding_idx=-1)
    assert emb.padding_idx == 999
    e = np_of(emb.weight)
    assert np.all(e[999] == 0) and e[:999].std() == pytest.approx(1.0, rel=0.05)
    nb = nn.Linear(3, 2, bias=False)
    assert nb.bias is None and repr(nb) == "Linear(in_features=3, out_features=2, bias=False)"


# ------------------------------------------------------------------ forward values and gradients vs PyTorch

def _torch():
    return pytest.importorskip("torch")


def _td(a, grad=False):
    t = tensord.tensor(np.asarray(a))
    if grad:
        t.requires_grad_(True)
    return t


def test_mlp_gradients_equal_pytorch(session):
    torch = _torch()
    rng = np.random.RandomState(0)
    tmodel = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    model.load_state_dict({k: tensord.from_numpy(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    x = rng.randn(16, 64).astype(np.float32)
    y = rng.randint(0, 10, size=16)
    tloss = torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)), torch.from_numpy(y))
    tloss.backward()
    loss = F.cross_entropy(model(tensord.from_numpy(x)), tensord.from_numpy(y))
    loss.backward()
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-5)
    tgrads = {k: p.grad.numpy() for k, p in tmodel.named_parameters()}
    for k, p in model.named_parameters():
        assert p.grad is not None, k
        np.testing.assert_allclose(np_of(p.grad), tgrads[k], rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("kw", [
    dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=2),
    dict(weight=[0.5, 1.0, 2.0, 0.1, 3.0]), dict(weight=[0.5, 1.0, 2.0, 0.1, 3.0], ignore_index=1, reduction="sum"),
    dict(label_smoothing=0.2), dict(label_smoothing=0.1, weight=[0.5, 1.0, 2.0, 0.1, 3.0], ignore_index=4),
    dict(label_smoothing=0.3, reduction="none"),
])
def test_cross_entropy_and_nll_match_pytorch(session, kw):
    torch = _torch()
    rng = np.random.RandomState(1)
    x = rng.randn(6, 5).astype(np.float32)
    y = np.array([0, 2, 4, 2, 1, 3])
    tkw = dict(kw)
    kw = dict(kw)
    if "weight" in kw:
        tkw["weight"] = torch.tensor(kw["weight"])
        kw["weight"] = tensord.tensor(kw["weight"])
    tx = torch.tensor(x, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.from_numpy(y), **tkw)
    tl.sum().backward()
    xx = _td(x, grad=True)
    loss = F.cross_entropy(xx, tensord.from_numpy(y), **kw)
    loss.sum().backward()
    np.testing.assert_allclose(np_of(loss), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_of(xx.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    if kw.get("label_smoothing", 0) == 0:
        lp = np.asarray(torch.log_softmax(torch.tensor(x), 1))
        tn = torch.nn.functional.nll_loss(torch.tensor(lp), torch.from_numpy(y), **tkw)
        n = F.nll_loss(tensord.tensor(lp), tensord.from_numpy(y), **kw)
        np.testing.assert_allclose(np_of(n), tn.numpy(), rtol=1e-5, atol=1e-6)


def test_loss_modules_match_pytorch(session):
    # nn.CrossEntropyLoss, NLLLoss, MSELoss and L1Loss: the functions' values
    # and gradients, PyTorch's constructor arguments, weight as a buffer, repr.
    torch = _torch()
    rng = np.random.RandomState(2)
    x = rng.randn(6, 5).astype(np.float32)
    y = np.array([0, 2, 4, 2, 1, 3])
    t = rng.randn(6, 5).astype(np.float32)
    w = [0.5, 1.0, 2.0, 0.1, 3.0]
    cases = [
        ("CrossEntropyLoss", dict(), y), ("CrossEntropyLoss", dict(weight=w, ignore_index=1, reduction="sum"), y),
        ("CrossEntropyLoss", dict(label_smoothing=0.2, reduction="none"), y), ("NLLLoss", dict(weight=w), y),
        ("MSELoss", dict(), t), ("MSELoss", dict(reduction="sum"), t), ("L1Loss", dict(reduction="none"), t),
    ]
    for name, kw, target in cases:
        tkw = {k: torch.tensor(v) if k == "weight" else v for k, v in kw.items()}
        dkw = {k: tensord.tensor(v) if k == "weight" else v for k, v in kw.items()}
        tm, dm = getattr(torch.nn, name)(**tkw), getattr(nn, name)(**dkw)
        assert repr(dm) == repr(tm) == f"{name}()"
        assert [k for k, _ in dm.named_buffers()] == [k for k, _ in tm.named_buffers()], name
        tx = torch.tensor(x, requires_grad=True)
        tl = tm(tx, torch.from_numpy(target))
        tl.sum().backward()
        xx = _td(x, grad=True)
        loss = dm(xx, tensord.from_numpy(target))
        loss.sum().backward()
        np.testing.assert_allclose(np_of(loss), tl.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(np_of(xx.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    # A bad reduction fails at forward, as in PyTorch; the deprecated
    # positional size_average and reduce set it as PyTorch reads them.
    bad = nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        bad(tensord.zeros(2), tensord.zeros(2))
    assert nn.NLLLoss(None, None, 2).ignore_index == 2
    for args, kw in [((False,), {}), ((None, False), {}), ((True, True), {}), ((), dict(reduce=False))]:
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            ours = nn.MSELoss(*args, **kw).reduction
        with pytest.warns(UserWarning):
            assert ours == torch.nn.MSELoss(*args, **kw).reduction, (args, kw)


def test_a_batch_with_every_target_ignored_gives_nan_loss_and_zero_gradients(session):
    # As PyTorch's kernels: 'mean' over zero weight is NaN, but the gradient
    # is 0, not NaN (a fully padded batch must not poison the parameters).
    torch = _torch()
    x = np.random.RandomState(3).randn(4, 5).astype(np.float32)
    for fn, kw in [("cross_entropy", {}), ("cross_entropy", dict(label_smoothing=0.2)), ("nll_loss", {}),
                   ("cross_entropy", dict(weight=[1.0, 2.0, 3.0, 4.0, 5.0]))]:
        tx = torch.tensor(x, requires_grad=True)
        tkw = {k: torch.tensor(v) if k == "weight" else v for k, v in kw.items()}
        getattr(torch.nn.functional, fn)(tx, torch.full((4,), -100), **tkw).backward()
        xx = _td(x, grad=True)
        dkw = {k: tensord.tensor(v) if k == "weight" else v for k, v in kw.items()}
        loss = getattr(F, fn)(xx, tensord.full((4,), -100), **dkw)
        loss.backward()
        assert math.isnan(loss.item()), (fn, kw)
        np.testing.assert_array_equal(np_of(xx.grad), tx.grad.numpy(), err_msg=f"{fn} {kw}")
    y = F.cross_entropy(_td(x, grad=True), tensord.tensor([0, 1, -100, 3]))  # some ignored: the usual mean
    assert y.item() == pytest.approx(torch.nn.functional.cross_entropy(
        torch.tensor(x), torch.tensor([0, 1, -100, 3])).item(), rel=1e-6)


def test_cross_entropy_shapes_and_errors(session):
    torch = _torch()
    x = np.random.RandomState(2).randn(2, 3, 4).astype(np.float32)
    y = np.array([[0, 1, 2, 1], [2, 2, 0, 1]])
    t = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(y))
    assert F.cross_entropy(tensord.tensor(x), tensord.tensor(y)).item() == pytest.approx(t.item(), rel=1e-5)
    one = F.cross_entropy(tensord.tensor(x[0, :, 0]), tensord.tensor(0))
    assert one.item() == pytest.approx(torch.nn.functional.cross_entropy(torch.tensor(x[0, :, 0]),
                                                                           torch.tensor(0)).item(), rel=1e-5)
    with pytest.raises(ValueError, match="Expected input batch_size \\(2\\) to match target batch_size \\(3\\)"):
        F.cross_entropy(tensord.zeros(2, 3), tensord.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(tensord.zeros(2, 3), tensord.tensor([0, 1]), reduction="avg")
    with pytest.raises(RuntimeError, match="int64"):
        F.nll_loss(tensord.zeros(2, 3), tensord.tensor([0.0, 1.0]))


def test_activations_and_functional_match_pytorch(session):
    torch = _torch()
    tF = torch.nn.functional
    rng = np.random.RandomState(3)
    x = rng.randn(4, 6).astype(np.float32)
    cases = [
        (lambda t: F.relu(t), lambda t: tF.relu(t)),
        (lambda t: nn.GELU()(t), lambda t: tF.gelu(t)),
        (lambda t: nn.GELU("tanh")(t), lambda t: tF.gelu(t, approximate="tanh")),
        (lambda t: nn.Sigmoid()(t), lambda t: torch.sigmoid(t)),
        (lambda t: nn.Tanh()(t), lambda t: torch.tanh(t)),
        (lambda t: nn.Softmax(dim=1)(t), lambda t: tF.softmax(t, 1)),
        (lambda t: F.softmax(t, 0), lambda t: tF.softmax(t, 0)),
        (lambda t: F.log_softmax(t, -1), lambda t: tF.log_softmax(t, -1)),
        (lambda t: F.layer_norm(t, (6,)), lambda t: tF.layer_norm(t, (6,))),
        (lambda t: F.layer_norm(t, (4, 6), eps=1e-3), lambda t: tF.layer_norm(t, (4, 6), eps=1e-3)),
        (lambda t: F.mse_loss(t, t * 0.5 + 1), lambda t: tF.mse_loss(t, t * 0.5 + 1)),
        (lambda t: F.mse_loss(t, t.exp(), reduction="sum"), lambda t: tF.mse_loss(t, t.exp(), reduction="sum")),
        (lambda t: F.dropout(t, 0.5, training=False), lambda t: tF.dropout(t, 0.5, training=False)),
    ]
    for i, (ours, theirs) in enumerate(cases):
        tx = torch.tensor(x, requires_grad=True)
        tout = theirs(tx)
        (tout * torch.arange(tout.numel()).reshape(tout.shape).float().add(1)).sum().backward()
        xx = _td(x, grad=True)
        out = ours(xx)
        (out * (tensord.arange(out.numel()).reshape(list(out.shape)).float() + 1)).sum().backward()
        np.testing.assert_allclose(np_of(out), tout.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=str(i))
        np.testing.assert_allclose(np_of(xx.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=str(i))


def test_layernorm_and_embedding_modules_match_pytorch(session):
    torch = _torch()
    rng = np.random.RandomState(4)
    tln = torch.nn.LayerNorm(5)
    with torch.no_grad():
        tln.weight.copy_(torch.tensor(rng.randn(5).astype(np.float32)))
        tln.bias.copy_(torch.tensor(rng.randn(5).astype(np.float32)))
    ln = nn.LayerNorm(5)
    ln.load_state_dict({k: tensord.from_numpy(v.numpy()) for k, v in tln.state_dict().items()})
    x = rng.randn(3, 5).astype(np.float32)
    tln(torch.tensor(x)).pow(2).sum().backward()
    ln(tensord.tensor(x)).pow(2).sum().backward()
    for k, p in ln.named_parameters():
        np.testing.assert_allclose(np_of(p.grad), dict(tln.named_parameters())[k].grad.numpy(), rtol=1e-4,
                                   atol=1e-5)

    temb = torch.nn.Embedding(6, 3, padding_idx=2)
    emb = nn.Embedding(6, 3, padding_idx=2)
    emb.load_state_dict({"weight": tensord.from_numpy(temb.weight.detach().numpy())})
    idx = np.array([[0, 2, 5], [2, 2, 1]])
    tout = temb(torch.tensor(idx))
    (tout * torch.arange(18.0).reshape(2, 3, 3)).sum().backward()
    out = emb(tensord.tensor(idx))
    assert out.shape == (2, 3, 3)
    (out * tensord.arange(18.0).reshape(2, 3, 3)).sum().backward()
    np.testing.assert_array_equal(np_of(out), tout.detach().numpy())
    np.testing.assert_allclose(np_of(emb.weight.grad), temb.weight.grad.numpy())
    assert np.all(np_of(emb.weight.grad)[2] == 0)
    with pytest.raises(RuntimeError, match="Long, Int"):
        emb(tensord.tensor([0.0]))


def test_dropout_training_and_eval(session):
    tensord.manual_seed(5)
    d = nn.Dropout(0.25)
    x = tensord.ones(200, 100)
    y = np_of(d(x))
    kept = y != 0
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert kept.mean() == pytest.approx(0.75, abs=0.01)
    d.eval()
    assert d(x) is x
    assert F.dropout(x, 0.0) is x
    assert np.all(np_of(F.dropout(x, 1.0)) == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    tensord.manual_seed(5)
    xx = tensord.ones(50, requires_grad=True)
    out = F.dropout(xx, 0.5)
    out.sum().backward()
    np.testing.assert_array_equal(np_of(xx.grad), np_of(out))      # grad = mask / (1 - p) = out for ones


def test_linear_module_math(session):
    lin = nn.Linear(3, 2)
    lin.load_state_dict({"weight": tensord.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]]),
                         "bias": tensord.tensor([0.5, -1.0])})
    x = tensord.tensor([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(np_of(lin(x)), [[-1.5, 4.5]])
    np.testing.assert_allclose(np_of(F.linear(x, lin.weight)), [[-2.0, 5.5]])
    with tensord.device("meta"):
        y = nn.Linear(3, 2)(tensord.randn(7, 5, 3))
    assert y.shape == (7, 5, 2)


def test_sequential_containers():
    with tensord.device("meta"):
        s = nn.Sequential(collections.OrderedDict([("a", nn.Linear(2, 3)), ("r", nn.ReLU())]))
        s.append(nn.Linear(3, 1))
        assert [n for n, _ in s.named_children()] == ["a", "r", "2"]
        assert s(tensord.zeros(4, 2)).shape == (4, 1)
        ml = nn.ModuleList([nn.Linear(1, 1), nn.Tanh()])
        assert len(ml) == 2 and isinstance(ml[-1], nn.Tanh)
        assert [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias"]


def test_dict_and_parameter_containers():
    with tensord.device("meta"):
        d = nn.ModuleDict({"a": nn.Linear(2, 3), "act": nn.ReLU()})
        d["out"] = nn.Linear(3, 1)
        d.update([("extra", nn.Tanh())])
        assert list(d) == ["a", "act", "out", "extra"] and len(d) == 4 and "out" in d
        assert [n for n, _ in d.named_parameters()] == ["a.weight", "a.bias", "out.weight", "out.bias"]
        assert isinstance(d.pop("extra"), nn.Tanh) and "extra" not in d
        with pytest.raises(KeyError, match="attribute 'train' already exists"):
            d["train"] = nn.ReLU()
        with pytest.raises(KeyError, match='contain "."'):
            d["a.b"] = nn.ReLU()
        pl = nn.ParameterList([nn.Parameter(tensord.zeros(2)), tensord.ones(3)])
        pl += [tensord.zeros(1)]
        assert len(pl) == 3 and [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
        assert isinstance(pl[1], nn.Parameter) and pl[1].requires_grad and pl[-1].shape == (1,)
        assert [p.shape for p in pl[1:]] == [(3,), (1,)]
        with pytest.raises(IndexError, match="index 3 is out of range"):
            pl[3]
        pd = nn.ParameterDict({"w": tensord.zeros(2, 2)})
        pd["b"] = nn.Parameter(tensord.zeros(2))
        assert list(pd) == ["w", "b"] and [n for n, _ in pd.named_parameters()] == ["w", "b"]
        assert pd.get("nope") is None and isinstance(pd["w"], nn.Parameter)
        del pd["w"]
        assert list(pd.keys()) == ["b"] and [n for n, _ in pd.named_parameters()] == ["b"]
        with pytest.raises(KeyError):
            pd["w"]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleDict({"h": nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])})
            self.scales = nn.ParameterList([nn.Parameter(tensord.ones(2)) for _ in range(2)])
            self.extra = nn.ParameterDict({"bias": nn.Parameter(tensord.zeros(2))})

        def forward(self, x):
            for lin, s in zip(self.blocks["h"], self.scales):
                x = lin(x) * s
            return x + self.extra["bias"]

    with tensord.device("meta"):
        net = Net()
    assert sorted(net.state_dict()) == ["blocks.h.0.bias", "blocks.h.0.weight", "blocks.h.1.bias",
                                        "blocks.h.1.weight", "extra.bias", "scales.0", "scales.1"]
    assert len(list(net.parameters())) == 7
    y = net(tensord.empty(4, 2, device="meta"))
    assert y.shape == (4, 2) and y.requires_grad


def test_public_names_document_themselves():
    import inspect

    from tensord import optim
    missing = []
    for mod in (nn, F, nn.init, nn.utils, optim):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                continue
            doc = inspect.getdoc(obj)
            if not doc or len(doc) < 20:
                missing.append(f"{mod.__name__}.{name}")
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and callable(member) and attr not in ("forward", "extra_repr"):
                        if not inspect.getdoc(member):
                            missing.append(f"{mod.__name__}.{name}.{attr}")
    for name in ("save", "load"):
        if len(inspect.getdoc(getattr(tensord, name)) or "") < 20:
            missing.append(name)
    assert not missing, f"public names without a useful docstring: {missing}"


def test_to_device_and_back(session):
    m = Block()
    assert m.to("cpu") is m and m.seq[0].weight.device == tensord.device("cpu")
    m.to(tensord.device("meta"))
    assert all(t.is_meta for t in m.state_dict().values()) and m.cache.is_meta
    assert m(tensord.zeros(2, 3, dtype=tensord.int64, device="meta")).shape == (2, 3, 4)
    m.to_empty(device="cpu")
    assert not any(t.is_meta for t in m.state_dict().values())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    for mod in m.modules():
        if hasattr(mod, "reset_parameters"):
            mod.reset_parameters()
    out = m(tensord.tensor([[1, 0, 3]]))
    assert out.shape == (1, 3, 4) and np.all(np.isfinite(np_of(out)))


def test_inplace_variants(session):
    x = tensord.tensor([-1.0, 2.0, -3.0])
    y = x * 1
    assert F.relu(y, inplace=True) is y and np_of(y).tolist() == [0.0, 2.0, 0.0]
    r = nn.ReLU(inplace=True)
    assert repr(r) == "ReLU(inplace=True)"
    z = x * 1
    assert r(z) is z and np_of(z).tolist() == [0.0, 2.0, 0.0]
    tensord.manual_seed(0)
    d = tensord.ones(1000)
    assert F.dropout(d, 0.5, inplace=True) is d
    vals = set(np.unique(np_of(d)).tolist())
    assert vals == {0.0, 2.0}
    a = tensord.tensor([0.5, 1.5], requires_grad=True)
    b = a * 2
    F.relu(b, inplace=True).sum().backward()
    assert np_of(a.grad).tolist() == [2.0, 2.0]
