"""A small CNN trained on scikit-learn's bundled handwritten digits with nbjax, eagerly and
under ``jit``, then the same model in JAX (``jax.jit``) and PyTorch (eager) when installed,
with the time per step of each. The model is written once against JAX's public API
(``nbjax/_cnn_demo.py``), so the same code runs on nbjax and on JAX.

  python examples/cnn_digits.py [--epochs 12]
"""
import argparse

import nbjax
from nbjax.__main__ import train_cnn

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--epochs", type=int, default=12)
  train_cnn(nbjax, ap.parse_args().epochs)
