"""Makes the in-tree tensord package importable when it is not installed
(examples run from a source checkout). Imported by the examples only."""
import os
import sys

try:
    import tensord  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python-client"))
