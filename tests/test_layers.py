"""Imports point one way (README, Architecture): every import statement in the package,
module-level or inside a function, checked against the layering."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOTTOM = ["core", "registry", "dtypes", "xla", "array", "config", "jaxpr"]
UP = ("nbjax.lax", "nbjax.numpy", "nbjax.api", "nbjax.random", "nbjax.ad_checkpoint",
      "nbjax.eager_cache")


def _imports(path):
  tree = ast.parse(open(path).read())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        yield a.name
    elif isinstance(node, ast.ImportFrom) and node.module:
      if node.module == "nbjax":
        for a in node.names:
          yield f"nbjax.{a.name}"
      else:
        yield node.module


def _modules(sub):
  d = os.path.join(ROOT, sub)
  return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".py"))


def _up(name, forbidden):
  return name == "nbjax" or any(name == f or name.startswith(f + ".") for f in forbidden)


@pytest.mark.parametrize("path", _modules("kernels"), ids=os.path.basename)
def test_kernels_never_import_nbjax(path):
  assert not [n for n in _imports(path) if n.split(".")[0] == "nbjax"]


@pytest.mark.parametrize("name", BOTTOM)
def test_core_layer_never_reaches_up(name):
  bad = [n for n in _imports(os.path.join(ROOT, "nbjax", f"{name}.py"))
         if _up(n, UP + ("nbjax.interpreters",))]
  assert not bad, f"nbjax/{name}.py imports {bad}"


@pytest.mark.parametrize("path", _modules("nbjax/interpreters"), ids=os.path.basename)
def test_interpreters_never_import_lax_numpy_or_api(path):
  bad = [n for n in _imports(path) if _up(n, UP)]
  assert not bad, f"{path} imports {bad}"


def test_production_code_never_imports_the_test_harness():
  bad = []
  for dirpath, _, files in os.walk(os.path.join(ROOT, "nbjax")):
    for f in files:
      path = os.path.join(dirpath, f)
      if f.endswith(".py") and f != "testing.py":
        bad += [(path, n) for n in _imports(path) if n == "nbjax.testing"]
  assert not bad


@pytest.mark.parametrize("path", _modules("kernels"), ids=os.path.basename)
def test_kernel_modules_bind_each_global_once(path):
  """numba reads a kernel's globals when it compiles: a module-level name bound twice (two
  tables of constants both unpacked into ``_EP0``...) silently changes every kernel that
  read the first binding. Only ``f = njit(...)(f)`` may rebind a name."""
  seen = set()
  for node in ast.parse(open(path).read()).body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
      names = [node.name]
    elif isinstance(node, ast.Assign):
      if isinstance(node.value, ast.Call) and any(
          isinstance(a, ast.Name) and any(isinstance(t, ast.Name) and t.id == a.id
                                          for t in node.targets) for a in node.value.args):
        continue  # f = njit(...)(f): the same function, compiled
      names = [x.id for t in node.targets for x in ast.walk(t) if isinstance(x, ast.Name)]
    else:
      continue
    twice = seen.intersection(names)
    assert not twice, f"{os.path.basename(path)}:{node.lineno} rebinds {sorted(twice)}"
    seen.update(names)
