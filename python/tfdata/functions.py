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


def _output_names(name, output_names):
    if output_names is None:
        return None
    if isinstance(output_names, str) or not all(isinstance(n, str) and n for n in output_names):
        raise TypeError(f"tfdata function {name!r}: output_names must be a list of non-empty str, got {output_names!r}")
    names = tuple(output_names)
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"tfdata function {name!r}: output_names must be distinct and not empty, got {names!r}")
    return names


def register_function(name, fn, output_names=None):
    """Registers ``fn`` under ``name`` in this process; returns ``fn``.

    ``output_names`` names the components it returns (a dict with exactly these keys, or a tuple of
    this many): ``.map(fn)`` then gives trainers a dict by these names. Registering another
    function under a name already taken is a ValueError (two modules that claim one name would
    otherwise run whichever was imported last)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"tfdata.register_function: the name must be 1 to 200 letters, digits, '_', '.', ':' or "
                         f"'-', got {name!r}")
    if not callable(fn):
        raise TypeError(f"tfdata.register_function({name!r}): expected a callable, got {type(fn).__name__}")
    known = _REGISTRY.get(name)
    if known is not None and known is not fn:
        raise ValueError(f"tfdata.register_function: '{name}' is already registered "
                         f"(to {getattr(known, '__qualname__', known)!r} from {getattr(known, '__module__', '?')})")
    outputs = _output_names(name, output_names)
    _REGISTRY[name] = fn
    try:
        fn.__tfdata_function__ = name
        fn.__tfdata_output_names__ = outputs
    except (AttributeError, TypeError):
        pass  # a builtin or a bound method: callable by name, not as map(fn)
    return fn


def function(name, output_names=None):
    """Decorator: ``@tfdata.function("augment")`` registers the function under that name;
    ``output_names=("image", "label")`` names what it returns (see register_function)."""
    def register(fn):
        return register_function(name, fn, output_names)
    return register


def registered_functions():
    """The names registered in this process, sorted."""
    return sorted(_REGISTRY)


def lookup(name):
    return _REGISTRY.get(name)


def py(name, output_names=None):
    """The pipeline function that calls the Python function registered as ``name`` on the workers.

    ``output_names`` names the components it returns (a dict with exactly these keys, or a tuple of
    this many), so that trainers receive a dict by these names."""
    from tfdata.pipeline import Function
    outputs = _output_names(name, output_names)
    return Function("python", {"name": name, **({"output_names": list(outputs)} if outputs else {})})
