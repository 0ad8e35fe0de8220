"""numba's on-disk cache keyed on every compiled-drafter source file, not only the function's own.

numba re-compiles a cached function when its own file changes, but not when a function it calls
from another file changes: the kernels (kernels.py) inline core.py, so an edit or a
`git checkout` of core.py alone would leave stale machine code. `install()` puts locators in
front of numba's that stamp our functions with a hash of the KERNEL_FILES.
"""

from __future__ import annotations

import functools
import hashlib
import os

KERNEL_FILES = ("core.py", "kernels.py", "kernels_in_loop.py")
_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=1)
def source_stamp() -> str:
    """sha256 over the compiled drafter's source files."""
    h = hashlib.sha256()
    for name in KERNEL_FILES:
        with open(os.path.join(_DIR, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _ours(py_file: str) -> bool:
    p = os.path.abspath(py_file)
    return os.path.dirname(p) == _DIR and os.path.basename(p) in KERNEL_FILES


def _wrap(base: type) -> type:
    class Locator(base):
        def get_source_stamp(self):
            return source_stamp()

        @classmethod
        def from_function(cls, py_func, py_file):
            return super().from_function(py_func, py_file) if _ours(py_file) else None

    Locator.__name__ = Locator.__qualname__ = "Simkit" + base.__name__.lstrip("_")
    return Locator


def install() -> bool:
    """Register the locators once; False when this numba lacks the expected cache classes (then
    numba's own per-file stamps apply)."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    names = ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")
    bases = [getattr(caching, n, None) or getattr(caching, "_" + n, None) for n in names]
    if impl is None or any(b is None for b in bases) or not hasattr(impl, "_locator_classes"):
        return False
    if not getattr(impl, "_simkit_locators", False):
        impl._locator_classes = [_wrap(b) for b in bases] + list(impl._locator_classes)
        impl._simkit_locators = True
    return True
