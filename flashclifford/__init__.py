"""flashclifford: fused kernels for Clifford-algebra neural network layers.

MVGELU -> weighted (SGP) or fully connected (FCGP) geometric product -> grade-wise RMSNorm,
forward and backward, in C (CPU) and CUDA, on any DLPack array. See SPEC/docs for the
conventions. PyTorch is optional: ``flashclifford.ops`` works on NumPy alone; the torch ops
(``gelu_sgp_norm``, ``gelu_fcgp_norm``), ``nn`` and ``compat`` load torch when first used.
"""

from __future__ import annotations

import importlib

from . import _C, ops, reference
from .algebra import Algebra

__version__ = _C.build_info()["version"]

__all__ = ["Algebra", "ops", "reference", "build_info", "gelu_sgp_norm", "gelu_fcgp_norm", "nn", "compat"]

_TORCH_NAMES = {
    "gelu_sgp_norm": "._torch_ops", "gelu_fcgp_norm": "._torch_ops", "nn": ".nn", "compat": ".compat",
}


def build_info() -> dict:
    """Backends, CUDA version and architectures compiled in, and whether a GPU is usable now."""
    return _C.build_info()


def __getattr__(name):
    # torch-dependent parts load on first use, so `import flashclifford` needs only NumPy
    if name in _TORCH_NAMES:
        module = importlib.import_module(_TORCH_NAMES[name], __name__)
        value = module if name in ("nn", "compat") else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flashclifford' has no attribute {name!r}")
