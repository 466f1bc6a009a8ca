"""Pipelines from Python: a builder over proto/pipeline.proto.

The builder is generated from the pipeline language's own schema (the protobuf descriptors compiled
into the extension), so every op and function of docs/pipeline.md is here, with the proto's field
names, and a field added to the proto appears without a change to this file::

    p = tfdata.Pipeline.range(10).map(tfdata.fn.arith("mul", 2)).batch(4)
    print(p.to_text())

A pipeline is its text form: immutable, each method returns a new pipeline with one more op.
Type errors (a str where an int belongs, an unknown field) are TypeError/ValueError at the call;
validation (a batch size of 0, a missing file) happens where the engine does it: element_spec,
run(), register_dataset(); its errors are tfdata.InvalidArgumentError (a ValueError), with the
engine's message.
"""

import os

import numpy as np

from tfdata import _native

_SCHEMA = _native.pipeline_schema()
_MESSAGES = {name: fields for name, fields in _SCHEMA["messages"].items()}
_OPS = dict(_SCHEMA["ops"])
_FUNCTIONS = dict(_SCHEMA["functions"])

# tf.data's constants (note tfdata's engine itself uses -1 for unknown and -2 for infinite).
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2

# The DataType enum of proto/pipeline.proto, by numpy's names ("int64" -> "INT64"); "bytes" too.
_DTYPE_NAMES = {name.lower(): name for name in _SCHEMA["enums"]["DataType"] if name != "DTYPE_UNSPECIFIED"}
_DTYPE_NAMES["bytes"] = "STRING"


def _dtype_name(value, where):
    """A DataType enum name from a str ("int64"), a numpy dtype or a Python type."""
    if isinstance(value, str):
        return _DTYPE_NAMES.get(value.lower(), value)
    if value in (str, bytes, object):
        return "STRING"
    try:
        dt = np.dtype(value)
    except TypeError:
        raise TypeError(f"{where}: expected a dtype (e.g. 'int64', numpy.float32), got {value!r}") from None
    if dt.kind in "USO":
        return "STRING"
    if dt.name not in _DTYPE_NAMES:
        raise ValueError(f"{where}: dtype {dt.name} is not supported (one of {', '.join(sorted(_DTYPE_NAMES))})")
    return _DTYPE_NAMES[dt.name]


def tensor_value(value, where="tensor"):
    """A TensorValue message (as a dict) from anything numpy.asarray accepts."""
    if isinstance(value, dict):
        return value
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype.kind == "O" and arr.size and not all(isinstance(v, (str, bytes)) for v in arr.flat):
        raise TypeError(f"{where}: values must be numbers, bools, str or bytes")
    out = {"dtype": _dtype_name(arr.dtype, where)}
    if arr.ndim == 0:
        out["scalar"] = True
    else:
        out["shape"] = list(arr.shape)
    flat = arr.reshape(-1)
    if arr.dtype.kind == "b":
        out["bool_values"] = [bool(v) for v in flat]
    elif arr.dtype.kind in "iu":
        out["int_values"] = [int(v) for v in flat]
    elif arr.dtype.kind == "f":
        out["float_values"] = [float(v) for v in flat]
    elif arr.dtype.kind in "USO":
        out["string_values"] = [v.encode() if isinstance(v, str) else bytes(v) for v in flat]
    else:
        raise TypeError(f"{where}: numpy dtype {arr.dtype} is not supported")
    return out


def _plain(value, field, where):
    """Converts a builder argument to what the extension fills a message with."""
    name, kind, repeated, type_name = field
    if repeated:
        if isinstance(value, np.ndarray) and type_name != "TensorValue":
            value = value.tolist()
        if type_name == "Dims" and isinstance(value, (list, tuple)) and value and \
                not isinstance(value[0], (list, tuple)):
            value = [value]  # one component's shape
        if isinstance(value, (list, tuple)):
            return [_plain_one(v, kind, type_name, f"{where}[{i}]") for i, v in enumerate(value)]
    return _plain_one(value, kind, type_name, where)


def _plain_one(value, kind, type_name, where):
    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if kind == "message":
        if type_name == "Pipeline":
            if isinstance(value, Pipeline):
                return value.to_text()
            if isinstance(value, str):
                return value
            raise TypeError(f"{where}: expected a tfdata.Pipeline, got {type(value).__name__}")
        if type_name == "Function":
            if isinstance(value, Function):
                return value._plain
            name = getattr(value, "__tfdata_function__", None)
            if callable(value) and isinstance(name, str):
                # A registered Python function, by its name (and the output names it was registered with).
                outputs = getattr(value, "__tfdata_output_names__", None)
                return {"python": {"name": name, **({"output_names": list(outputs)} if outputs else {})}}
            if callable(value):
                raise TypeError(f"{where}: {getattr(value, '__qualname__', value)!r} is a Python function that is "
                                f"not registered: register it with @tfdata.function(\"name\") in a module that "
                                f"the workers load (--python-module), or use tfdata.py(\"name\")")
            raise TypeError(f"{where}: expected a function such as tfdata.fn.decode_jpeg(...), "
                            f"got {type(value).__name__}")
        if type_name == "TensorValue":
            return tensor_value(value, where)
        if type_name == "Dims" and isinstance(value, (list, tuple)):
            return [-1 if d is None else d for d in value]
        if isinstance(value, dict):
            return _plain_fields(type_name, value, where)
        return value
    if kind == "enum" and type_name == "DataType":
        return _dtype_name(value, where)
    if kind in ("string", "bytes") and isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _plain_fields(message, fields, where):
    by_name = {f[0]: f for f in _MESSAGES[message]}
    out = {}
    for key, value in fields.items():
        if key not in by_name:
            names = ", ".join(by_name)
            raise ValueError(f"{where}: {message} has no field '{key}' (fields: {names})")
        out[key] = _plain(value, by_name[key], f"{where}.{key}")
    return out


def _bind(kind, message, args, kwargs, skip_component):
    """Positional and keyword arguments to the fields of `message`, in the proto's order."""
    fields = _MESSAGES[message]
    positional = [f for f in fields if not (skip_component and f[0] == "component" and not f[2])]
    values = {}
    if kind == "range":
        if not 1 <= len(args) <= 3 and not kwargs:
            raise TypeError("range() takes 1 to 3 positional arguments: stop, or start, stop[, step]")
        names = {1: ("stop",), 2: ("start", "stop"), 3: ("start", "stop", "step")}.get(len(args), ())
        if len(args) > 3:
            raise TypeError("range() takes at most 3 positional arguments")
        values.update(zip(names, args))
    elif args and positional and positional[0][2] and not (len(positional) > 1 and positional[1][2]):
        # A list first (and not a second one, as normalize's mean and std): it takes every
        # positional value, as tfrecord("a", "b") or map(f, g).
        first = positional[0]
        if len(args) == 1 and (isinstance(args[0], tuple) or
                               (isinstance(args[0], list) and first[3] != "TensorValue")):
            args = tuple(args[0])
        if first[3] == "FeatureSpec" and len(args) == 1 and isinstance(args[0], dict) and \
                not {"name", "dtype"} <= set(args[0]):
            args = tuple(_feature_from_mapping(n, v) for n, v in args[0].items())
        values[first[0]] = list(args)
    else:
        if len(args) > len(positional):
            names = ", ".join(f[0] for f in positional)
            raise TypeError(f"{kind}() takes at most {len(positional)} positional arguments ({names}), "
                            f"got {len(args)}")
        values.update(zip((f[0] for f in positional), args))
    for key, value in kwargs.items():
        if key in values:
            raise TypeError(f"{kind}() got multiple values for argument '{key}'")
        values[key] = value
    return _plain_fields(message, values, kind)


def _feature_from_mapping(name, spec):
    if isinstance(spec, dict):
        return {"name": name, **spec}
    return {"name": name, "dtype": spec}


class Function:
    """A function for map and filter, e.g. ``tfdata.fn.decode_jpeg(channels=3)``."""

    __slots__ = ("kind", "_plain", "_text")

    def __init__(self, kind, fields):
        self.kind = kind
        self._plain = {kind: fields}
        self._text = _native.function_text(kind, fields)  # type-checks the fields

    def to_text(self):
        return self._text

    def __repr__(self):
        return f"tfdata.fn.{self.kind}: {self._text.strip()}"

    def __eq__(self, other):
        return isinstance(other, Function) and other._text == self._text

    def __hash__(self):
        return hash(self._text)


def _function_maker(kind, message):
    def make(*args, **kwargs):
        return Function(kind, _bind(kind, message, args, kwargs, skip_component=True))
    make.__name__ = kind
    make.__qualname__ = f"fn.{kind}"
    make.__doc__ = (f"The `{kind}` function ({message} in proto/pipeline.proto). Fields, in positional order "
                    f"(component is keyword only): " +
                    ", ".join(f"{f[0]} ({f[3] or f[1]}{', list' if f[2] else ''})" for f in _MESSAGES[message]))
    return make


class _Functions:
    """Functions for map and filter, one per kind of Function in proto/pipeline.proto."""

    def __repr__(self):
        return "tfdata.fn: " + ", ".join(_FUNCTIONS)


fn = _Functions()
for _kind, _message in _FUNCTIONS.items():
    setattr(fn, _kind, _function_maker(_kind, _message))


def message(name, *args, **kwargs):
    """A nested message of the pipeline language as a dict, checked (e.g. FeatureSpec)."""
    fields = _bind(name, name, args, kwargs, skip_component=False)
    _native.message_check(name, fields)
    return fields


def FeatureSpec(*args, **kwargs):  # noqa: N802 - named for the message it makes
    """A parse_example feature: ``FeatureSpec("label", "int64")``, ``FeatureSpec("x", "float32", [3])``."""
    return message("FeatureSpec", *args, **kwargs)


class _OpMethod:
    """One op as a method: ``Pipeline.range(10)`` starts a pipeline, ``p.batch(4)`` appends."""

    def __init__(self, kind, message):
        self.kind, self.message = kind, message
        fields = ", ".join(f"{f[0]} ({f[3] or f[1]}{', list' if f[2] else ''})" for f in _MESSAGES[message])
        self.__doc__ = f"The `{kind}` op ({message} in proto/pipeline.proto). Fields, in positional order: {fields}"

    def __get__(self, obj, cls):
        base = obj if obj is not None else cls()
        kind, message = self.kind, self.message

        def op(*args, **kwargs):
            fields = _bind(kind, message, args, kwargs, skip_component=False)
            return base._with_text(base._text + _native.op_text(kind, fields))
        op.__name__ = kind
        op.__doc__ = self.__doc__
        return op


class TensorSpec:
    """The type of one component: shape (a tuple, None for unknown dimensions; None for unknown
    rank), dtype (the pipeline language's name: "int64", "float32", "string", ...) and name (the
    parse_example feature, or None)."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype, name=None):
        self.shape, self.dtype, self.name = shape, dtype, name

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype, self.name) == (other.shape, other.dtype, other.name)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self):
        name = f", name={self.name!r}" if self.name else ""
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype}{name})"


def make_element_spec(spec, names):
    """tfdata's element spec in tf.data's form: one TensorSpec, a dict by name, or a tuple."""
    if spec is None:
        return None
    specs = [TensorSpec(shape, dtype, names[i] if names else None) for i, (dtype, shape) in enumerate(spec)]
    if names:
        return dict(zip(names, specs))
    if len(specs) == 1:
        return specs[0]
    return tuple(specs)


def _to_cardinality(n):
    return {-1: UNKNOWN_CARDINALITY, -2: INFINITE_CARDINALITY}.get(n, n)


class Pipeline:
    """A pipeline of the tfdata pipeline language (docs/pipeline.md).

    ``Pipeline.range(10)`` (or any source op called on the class) starts one; each op method
    returns a new pipeline with that op appended. ``Pipeline()`` is empty: the start of a
    sub-pipeline for interleave, whose first op is a transformation.
    """

    def __init__(self, text=""):
        self._text = text
        self._described = None

    @classmethod
    def from_text(cls, text, name="<text>"):
        """A pipeline from its protobuf text form (checked to parse)."""
        if not isinstance(text, str):
            raise TypeError(f"from_text: expected str, got {type(text).__name__}")
        return cls(_native.canonical_text(text, name))

    @classmethod
    def from_file(cls, path):
        """A pipeline from a file: .pbtxt (text), .pb (binary) or .json."""
        return cls(_native.load_pipeline_file(os.fspath(path)))

    def _with_text(self, text):
        return Pipeline(text)

    def to_text(self):
        """The pipeline in protobuf text format (what `tfdata run FILE` reads)."""
        return self._text

    def _describe(self):
        if self._described is None:
            self._described = _native.describe_pipeline(self._text, "<pipeline>")
        return self._described

    def validate(self):
        """Builds the pipeline as the engine does; raises its error (InvalidArgumentError)."""
        self._describe()
        return self

    @property
    def element_spec(self):
        """The type of the elements: a TensorSpec, a dict of them by name, or a tuple."""
        spec, names, _ = self._describe()
        return make_element_spec(spec, names)

    def cardinality(self):
        """The number of elements, or INFINITE_CARDINALITY (-1) / UNKNOWN_CARDINALITY (-2)."""
        return _to_cardinality(self._describe()[2])

    def run(self, max_memory=None):
        """Iterates the pipeline in this process, as ``tfdata run`` does.

        `max_memory`: bytes the pipeline may hold (buffers, caches, batches; ``tfdata run
        --max-memory``); default half of this machine's memory. A pipeline that needs more fails
        with a ResourceExhaustedError naming the op. Ctrl-C stops the run once the element being
        computed is done.
        """
        if max_memory is not None and (isinstance(max_memory, bool) or not isinstance(max_memory, int)):
            raise TypeError(f"max_memory: expected a number of bytes (int), got {type(max_memory).__name__}")
        if max_memory is not None and max_memory <= 0:
            raise ValueError(f"max_memory must be a positive number of bytes, got {max_memory}")
        return _native.run_pipeline(self._text, "<pipeline>", max_memory or 0)

    def __iter__(self):
        return self.run()

    def as_numpy_iterator(self):
        """The same as iter(): elements are numpy arrays and Python scalars already."""
        return self.run()

    def apply(self, transformation):
        """``transformation(self)``: e.g. ``p.apply(tfdata.distribute(...))``."""
        return transformation(self)

    def __repr__(self):
        one_line = " ".join(self._text.split())
        return f"tfdata.Pipeline({one_line!r})"

    def __eq__(self, other):
        return isinstance(other, Pipeline) and other._text == self._text

    def __hash__(self):
        return hash(self._text)


for _kind, _message in _OPS.items():
    setattr(Pipeline, _kind, _OpMethod(_kind, _message))

_PIPELINE_SUFFIXES = (".pbtxt", ".txtpb", ".textproto", ".pb", ".binpb", ".json")


def as_pipeline(value, where="dataset"):
    """A Pipeline from a Pipeline, pipeline text, or the path of a pipeline file."""
    if isinstance(value, Pipeline):
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.endswith(_PIPELINE_SUFFIXES)
                                          and "{" not in value):
        return Pipeline.from_file(value)
    if isinstance(value, str):
        return Pipeline.from_text(value)
    raise TypeError(f"{where}: expected a tfdata.Pipeline, pipeline text or a pipeline file path, "
                    f"got {type(value).__name__}")
