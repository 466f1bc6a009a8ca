"""Python functions on workers (docs/python.md, "Python functions on workers").

A function is registered under a name in a module that the worker's operator loads::

    # augment.py, loaded with `tfdata worker --python-module augment.py`
    import tfdata

    @tfdata.function("augment")
    def augment(image):
        return image[:, ::-1]

A pipeline calls it by name only, ``pipeline.map(tfdata.py("augment"))`` or ``.map(augment)``:
no code travels with a pipeline, so a dataset registered by a trainer can only call functions that
the worker's operator chose to load.
"""

import re

_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
_REGISTRY = {}


def register_function(name, fn):
    """Registers ``fn`` under ``name`` in this process; returns ``fn``.

    Registering another function under a name already taken is a ValueError (two modules that
    claim one name would otherwise run whichever was imported last)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"tfdata.register_function: the name must be 1 to 200 letters, digits, '_', '.', ':' or "
                         f"'-', got {name!r}")
    if not callable(fn):
        raise TypeError(f"tfdata.register_function({name!r}): expected a callable, got {type(fn).__name__}")
    known = _REGISTRY.get(name)
    if known is not None and known is not fn:
        raise ValueError(f"tfdata.register_function: '{name}' is already registered "
                         f"(to {getattr(known, '__qualname__', known)!r} from {getattr(known, '__module__', '?')})")
    _REGISTRY[name] = fn
    try:
        fn.__tfdata_function__ = name
    except (AttributeError, TypeError):
        pass  # a builtin or a bound method: callable by name, not as map(fn)
    return fn


def function(name):
    """Decorator: ``@tfdata.function("augment")`` registers the function under that name."""
    def register(fn):
        return register_function(name, fn)
    return register


def registered_functions():
    """The names registered in this process, sorted."""
    return sorted(_REGISTRY)


def lookup(name):
    return _REGISTRY.get(name)


def py(name):
    """The pipeline function that calls the Python function registered as ``name``."""
    from tfdata.pipeline import Function
    return Function("python", {"name": name})
