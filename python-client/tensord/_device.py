"""``tensord.device``: where a tensor lives ('cpu', 'cuda:N', 'meta', 'privateuseone:N'), as ``torch.device``."""
from . import _C

__all__ = ["device"]


class device:
    """A device, like ``torch.device``: ``device('cpu')``, ``device('cuda', 1)``,
    ``device('cuda:1')``, ``device('meta')``.

    ``repr(device('cpu')) == "device(type='cpu')"``; ``str(device('cuda:1')) ==
    'cuda:1'``. Parsing is done by the C++ client; an unknown device raises
    RuntimeError.

    Used as a context manager it sets the default device of factories that
    are called without ``device=`` on this thread (PyTorch 2's
    ``with torch.device(...)``)::

        with tensord.device("meta"):
            x = tensord.randn(8, 4)      # a meta tensor: shape only, no daemon
    """

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError(f"device() expected a string or a device, got {type.__class__.__name__}")
        t, i = _C.parse_device(type)
        if ":" not in type:
            i = None
        if index is not None:
            if ":" in type:
                raise RuntimeError(f"device(): type (string) must not include an index because index was passed explicitly: {type}")
            if t not in ("cuda", "privateuseone"):
                raise RuntimeError(f"device(): only cuda and privateuseone devices take an index, "
                                   f"got {type!r} with index {index}")
            if not isinstance(index, int) or index < 0:
                raise RuntimeError(f"device(): the index must be a non-negative int, got {index!r}")
            i = index
        self.type = t
        self.index = i

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __enter__(self):
        _C.push_device(self)
        return self

    def __exit__(self, *exc):
        _C.pop_device()
        return False
