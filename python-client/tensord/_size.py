"""``tensord.Size``: a tensor's shape, a tuple subclass (as ``torch.Size``)."""

__all__ = ["Size"]


class Size(tuple):
    """The shape of a tensor: a tuple of ints with PyTorch's repr.

    >>> tensord.zeros(8, 128, 64, device="meta").shape
    tensord.Size([8, 128, 64])

    Slicing a Size gives a Size; ``numel()`` is the product of the sizes.
    """

    __slots__ = ()

    def __repr__(self):
        return "tensord.Size([" + ", ".join(str(s) for s in self) + "])"

    __str__ = __repr__

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def numel(self):
        """The number of elements a tensor of this shape has (1 for ``Size([])``)."""
        n = 1
        for s in self:
            n *= s
        return n
