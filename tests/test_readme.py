"""The README's promises: its tour runs as written, and CI runs its test line."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md")).read()


def test_tour_runs():
  blocks = re.findall(r"```python\n(.*?)```", README, re.S)
  assert blocks
  for code in blocks:
    if "set_eager_backend" in code:  # the config block: run it, then restore the defaults
      import nbjax
      try:
        exec(code, {"nbjax": nbjax})
      finally:
        nbjax.config.set_eager_backend("sin", None)
        nbjax.config.update("enable_x64", True)
        nbjax.config.update("eager_cache", True)
        nbjax.config.update("jax_compilation_cache_dir", None)
    else:
      exec(code, {})


def test_quick_start_has_two_commands_and_ci_runs_the_test_line():
  start = README.index("## Quick start")
  section = README[start:README.index("\n## ", start + 1)]
  cmds = re.findall(r"```bash\n(.*?)\n```", section, re.S)
  assert len(cmds) == 2 and all("\n" not in c for c in cmds)
  ci = open(os.path.join(ROOT, ".ci", "run")).read()
  assert cmds[1] in ci, "the README's test line must be what .ci/run runs"


def test_demo_trains_the_digits_eagerly_and_under_jit():
  import nbjax
  import nbjax.numpy as jnp
  from nbjax import __main__ as demo
  res = demo.train_digits(nbjax, jnp, epochs=4)
  assert set(res) == {"eager", "jit"}
  for mode, (dt, acc, loss) in res.items():
    assert dt > 0 and acc > 0.85 and loss < 0.5, (mode, acc, loss)
