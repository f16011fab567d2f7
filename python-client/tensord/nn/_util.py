"""Small helpers shared by tensord.nn and tensord.optim (not public)."""
import contextlib


def tensord_module():
    """The ``tensord`` package (imported lazily: nn is imported while tensord initialises)."""
    import tensord

    return tensord


def no_grad():
    """``tensord.no_grad()``: a context in which ops record no autograd history."""
    td = tensord_module()
    ng = getattr(td, "no_grad", None)
    return ng() if ng is not None else contextlib.nullcontext()


def detach(t):
    """``t.detach()``: a view sharing data with ``t`` that does not require grad."""
    return t.detach() if hasattr(t, "detach") else t
