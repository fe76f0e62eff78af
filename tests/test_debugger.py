"""nbjax.debug.breakpoint and its "cli" backend against JAX 0.10.2: every expected transcript
below is what JAX 0.10.2 (x64 on) prints for the same commands."""
import io

import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import debugger


def session(cmds):
  return io.StringIO("".join(c + "\n" for c in cmds)), io.StringIO()


def f(stdin, stdout, x):
  y = jnp.sin(x)
  nbjax.debug.breakpoint(stdin=stdin, stdout=stdout, backend="cli")
  return y


def test_eager_commands():
  stdin, stdout = session(["p x", "pp {'a': y}", "x * 2", "p zz", "c"])
  out = f(stdin, stdout, jnp.array(2.))
  assert stdout.getvalue() == (
      "Entering jdb:\n(jdb) Array(2., dtype=float64, weak_type=True)\n"
      "(jdb) {'a': Array(0.90929743, dtype=float64, weak_type=True)}\n"
      "(jdb) Array(4., dtype=float64, weak_type=True)\n"
      "(jdb) *** NameError: name 'zz' is not defined\n(jdb) ")
  assert float(out) == pytest.approx(0.9092974268256817)


def test_jit_sees_the_run_values():
  stdin, stdout = session(["p x, y", "c"])
  nbjax.jit(lambda x: f(stdin, stdout, x))(jnp.array(2.))
  assert stdout.getvalue() == ("Entering jdb:\n(jdb) (Array(2., dtype=float64), "
                               "Array(0.90929743, dtype=float64))\n(jdb) ")


@pytest.mark.needs_guard  # (the guard refuses breakpoints: they run on every call)
def test_vmap_enters_once_per_element():
  stdin, stdout = session(["p x", "c", "p x", "c"])
  out = nbjax.vmap(lambda x: f(stdin, stdout, x))(jnp.array([1., 2.]))
  assert stdout.getvalue() == ("Entering jdb:\n(jdb) Array(1., dtype=float64)\n"
                               "(jdb) Entering jdb:\n(jdb) Array(2., dtype=float64)\n(jdb) ")
  assert out.shape == (2,)


@pytest.mark.needs_guard  # (the guard refuses breakpoints: they run on every call)
def test_grad_sees_primal_values():
  stdin, stdout = session(["p x", "c"])
  assert float(nbjax.grad(lambda x: f(stdin, stdout, x))(jnp.array(2.))) == pytest.approx(
      -0.4161468365471424)
  assert stdout.getvalue() == "Entering jdb:\n(jdb) Array(2., dtype=float64, weak_type=True)\n(jdb) "


def test_token_form():
  def g(stdin, stdout, x):
    t = nbjax.debug.breakpoint(stdin=stdin, stdout=stdout, backend="cli", token=x)
    return t * 2
  stdin, stdout = session(["p x", "c"])
  assert float(g(stdin, stdout, jnp.array(3.))) == 6.
  assert stdout.getvalue() == "Entering jdb:\n(jdb) Array(3., dtype=float64, weak_type=True)\n(jdb) "
  stdin, stdout = session(["p x", "c"])
  assert float(nbjax.jit(lambda x: g(stdin, stdout, x))(jnp.array(3.))) == 6.
  assert stdout.getvalue() == "Entering jdb:\n(jdb) Array(3., dtype=float64)\n(jdb) "
  with pytest.raises(ValueError, match="`ordered` and `token` are mutually exclusive arguments."):
    nbjax.debug.breakpoint(ordered=True, token=1.)


@pytest.mark.parametrize("cmds", [["q"], []])
def test_quit_and_eof_exit(cmds):
  stdin, stdout = session(cmds)
  with pytest.raises(SystemExit):
    f(stdin, stdout, jnp.array(2.))
  assert stdout.getvalue() == "Entering jdb:\n(jdb) "


def test_frames_source_and_navigation():
  stdin, stdout = session(["d", "l", "u", "p x", "bt", "c"])

  @nbjax.jit
  def g(x):
    y = f(stdin, stdout, x)
    return jnp.exp(y)
  g(jnp.array(2.))
  text = stdout.getvalue()
  assert text.startswith("Entering jdb:\n(jdb) At bottommost frame.\n> ")
  assert '->    nbjax.debug.breakpoint(stdin=stdin, stdout=stdout, backend="cli")' in text
  assert "->      y = f(stdin, stdout, x)" in text  # g's frame, one up
  assert "(jdb) Array(2., dtype=float64)\n" in text  # g's x
  assert "(jdb) Traceback:\n" in text and "test_debugger.py" in text
  assert "nbjax/" not in text  # nbjax's own frames are filtered out


def test_num_frames_globals_and_unflattenable_locals():
  stdin, stdout = session(["p x", "p d", "p jnp", "u", "u", "c"])

  def h():
    d = {(lambda v: v): 2., (lambda v: 2 * v): 3}  # keys that cannot be sorted: no pytree
    x = 2.
    nbjax.debug.breakpoint(stdin=stdin, stdout=stdout, backend="cli", num_frames=2)
    del d
    return x
  nbjax.jit(lambda: h())()
  text = stdout.getvalue()
  assert text.startswith("Entering jdb:\n(jdb) 2.0\n(jdb) <cant_flatten>\n"
                         "(jdb) *** NameError: name 'jnp' is not defined\n(jdb) > ")
  assert "->    nbjax.jit(lambda: h())()" in text  # the second (last) frame
  assert text.count("(jdb) At topmost frame.\n> ") == 1


def test_registry():
  assert debugger.get_debugger() is debugger.get_debugger("cli")
  assert debugger.get_debugger("no-such-backend") is debugger.get_debugger("cli")
  with pytest.raises(ValueError, match='Debugger with name "cli" already registered.'):
    debugger.register_debugger("cli", None, 0)
