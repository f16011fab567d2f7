"""OpInfo entries of elementwise ops (unary, binary, ternary); see opinfo.py for how to add one."""
import numpy as np
import torch

from opinfo_base import *  # noqa: F401,F403

OPINFOS = [
]
