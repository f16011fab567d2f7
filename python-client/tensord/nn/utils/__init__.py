"""``tensord.nn.utils``: helpers around modules' parameters, as ``torch.nn.utils``.

``clip_grad_norm_`` and ``clip_grad_value_`` rescale or clamp the ``.grad``
of parameters in place in the daemon (``clip_grad.py``). Importable as
``import tensord.nn.utils`` and reachable as ``tensord.nn.utils``.
"""
from .clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
