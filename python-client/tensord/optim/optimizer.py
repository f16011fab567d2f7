"""``tensord.optim.Optimizer``: the base class of optimizers, as ``torch.optim.Optimizer``."""
import collections
import copy

from .. import _C
from ..nn._util import no_grad, zero_grads

__all__ = ["Optimizer", "required"]

Tensor = _C.Tensor


class _Required:
    """Marks a hyper-parameter without a default (e.g. SGD's lr in PyTorch 1.13)."""

    def __repr__(self):
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class of optimizers.

    Args:
        params: an iterable of Tensors (one group), or of dicts each with
            ``"params"`` (Tensors) and per-group hyper-parameters overriding
            ``defaults``.
        defaults: dict of default hyper-parameters.

    Attributes:
        param_groups: list of dicts, each with ``"params"`` (a list of tensors)
            and every hyper-parameter.
        state: dict tensor -> dict of per-parameter state (daemon tensors such
            as momentum buffers, plus Python numbers such as ``step``), keyed
            by the parameter object itself.

    Subclasses implement ``step(closure=None)``, doing their updates as
    in-place ops in the daemon under no_grad. Raises TypeError when params is
    a single Tensor or holds non-Tensors, ValueError when it is empty or a
    tensor appears in two groups.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = _IdentityDict()
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__module__}.{type(params).__name__}")
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(g):
                if key != "params":
                    lines.append(f"    {key}: {g[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group):
        """Adds a group of parameters (a dict with ``"params"``; missing
        hyper-parameters take the defaults). TypeError for non-Tensor params,
        ValueError for a non-leaf tensor, a tensor already in another group, or
        a hyper-parameter without default that the group does not give."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if getattr(p, "is_leaf", True) is False:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Resets the grads of every parameter: by default
        (``set_to_none=True``, PyTorch 2.0's default; 1.13's is False) sets
        ``p.grad = None`` (no op at all; the next backward makes a fresh
        grad); with ``set_to_none=False``, as PyTorch 1.13's default, zeroes
        each existing ``p.grad`` in place in the daemon (one ``zero_`` op
        each, no round trip; a grad that has a grad_fn is detached first), so
        the next backward accumulates into it. tensord defaults to None
        because a streamed backward that fails leaves its error in the
        ``.grad`` tensors: zeroing them in place keeps the error, so every
        later step would fail too, while dropping them lets training go on.
        Parameters without a grad are left alone. Returns None."""
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    def step(self, closure=None):
        """Performs one update; subclasses implement it."""
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        import tensord

        with tensord.enable_grad():
            return closure()

    def state_dict(self):
        """``{"state": {index: state dict}, "param_groups": [group with "params" as
        indices]}``: parameters are numbered in group order. State tensors are
        the daemon tensors themselves (not copies)."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = []
            for p in g["params"]:
                if id(p) not in index:
                    index[id(p)] = len(index)
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                if p in self.state:
                    state[index[id(p)]] = self.state[p]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Loads a ``state_dict()``: hyper-parameters per group and per-parameter
        state. Floating state tensors are converted to their parameter's dtype
        and device and copied (``step`` is kept as is). ValueError when the number of groups
        or of parameters per group differs."""
        state_dict = copy.copy(state_dict)
        groups = self.param_groups
        saved = state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved):
            for idx, p in zip(s["params"], g["params"]):
                id_map[idx] = p

        def cast(param, value, key):
            if isinstance(value, Tensor):
                if key == "step":
                    return value
                with no_grad():
                    if value.dtype.is_floating_point and value.dtype is not param.dtype:
                        value = value.to(param.dtype)
                    if str(value.device) != str(param.device):
                        value = value.to(str(param.device))
                    return value.clone()      # the loaded optimizer must not share state with the source
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            return value

        new_state = _IdentityDict()
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                new_state[p] = cast(p, v, None)
            else:
                new_state[k] = v
        new_groups = []
        for g, s in zip(groups, saved):
            ng = dict(s)
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.state = new_state
        self.param_groups = new_groups


class _IdentityDict(collections.abc.MutableMapping):
    """A dict keyed by object identity (tensors' ``==`` is elementwise, so they
    cannot be ordinary dict keys safely); missing keys read as a new empty dict,
    like ``defaultdict(dict)``."""

    def __init__(self):
        self._d = {}

    def __getitem__(self, key):
        entry = self._d.get(id(key))
        if entry is None:
            value = {}
            self._d[id(key)] = (key, value)
            return value
        return entry[1]

    def __setitem__(self, key, value):
        self._d[id(key)] = (key, value)

    def __delitem__(self, key):
        del self._d[id(key)]

    def __contains__(self, key):
        return id(key) in self._d

    def __iter__(self):
        return (k for k, _ in list(self._d.values()))

    def __len__(self):
        return len(self._d)

    def __repr__(self):
        return "{" + ", ".join(f"<{type(k).__name__} {id(k):#x}>: {v!r}" for k, v in self._d.values()) + "}"
