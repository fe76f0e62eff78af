"""``nbjax._src.tree_util``: JAX's private ``jax._src.tree_util`` path: the public pytree API
plus the helpers JAX's own code and tests import from there (``prefix_errors``,
``broadcast_flattened_prefix_with_treedef``, ``default_registry``, ``dispatch_registry``)."""
from nbjax.tree_util import *  # noqa: F401,F403
from nbjax.tree_util import (  # noqa: F401
    broadcast_flattened_prefix_with_treedef, broadcast_prefix, default_registry,
    dispatch_registry, flatten_one_level, prefix_errors)
from nbjax._tree_util import tree_flatten, tree_leaves, tree_map, tree_structure  # noqa: F401
