"""A stand-in for PyTorch, for scripts/gpu-check.sh's run of the Python
device suites with the pack's Python (scripts/gpu-pack.sh puts this folder
into the pack as torch-stub/; nothing else uses it).

PyTorch cannot travel in the pack (Debian's python3-torch loads hundreds of
MiB of libraries), and the GPU machines' own PyTorch is built for another
Python. The device suites (test_device_opinfo.py, test_device_gradcheck.py)
import the OpInfo database, whose entries name PyTorch functions as the
references of the CPU suites (test_opinfo.py), but they compare each device
with tensord's own CPU and never call PyTorch.

So every name resolves to a placeholder (``torch.ops.aten.add``), and
calling one raises RuntimeError: a test that does reach PyTorch fails
instead of passing unchecked. ``torch.Tensor`` is a class nothing is an
instance of. ``import torch.nn`` and other submodules are not provided.
"""

__version__ = "0+gpu-pack-stub"


class Tensor:
    """No object is a torch.Tensor here: isinstance checks answer False."""


class _Placeholder:
    """A PyTorch name, resolved lazily; attributes are placeholders too."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: PyTorch is not in the GPU pack (scripts/torch-stub stands in for it)")

    def __repr__(self):
        return f"<stand-in for {self._name}>"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Placeholder(f"torch.{name}")
