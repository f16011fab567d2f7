"""OpInfo entries of matmul-family, shape and indexing ops; see opinfo.py for how to add one."""
import numpy as np
import torch

from opinfo_base import *  # noqa: F401,F403

OPINFOS = [
]
