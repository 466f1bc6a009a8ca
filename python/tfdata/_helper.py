"""A worker's Python helper process (lib/python_functions/helper_pool.h).

The worker starts ``python -m tfdata._helper --socket 3 --request 4 --response 5 --response 6 ... --protocol N --parent PID --module M ...``
with the descriptors inherited. It imports the modules (their @tfdata.function registrations are
what it can call), tells the worker which functions it has, then serves calls until the worker
closes the socket. Not for users to run.
"""

import argparse
import importlib
import importlib.util
import os
import sys
import traceback

from tfdata import _native, functions


def _load(module):
    """A module by name (on PYTHONPATH) or by the path of its .py file."""
    if module.endswith(".py") or os.sep in module:
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such Python file: {module}")
        name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(path))  # so that it can import its neighbours
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(module)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tfdata._helper")
    parser.add_argument("--socket", type=int, required=True)
    parser.add_argument("--request", type=int, required=True)
    parser.add_argument("--response", type=int, action="append", required=True)
    parser.add_argument("--module", action="append", default=[])
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--protocol", type=int, required=True)
    args = parser.parse_args(argv)
    _native.watch_parent(args.parent)  # first: an import may hang
    if args.protocol != _native.HELPER_PROTOCOL:
        text = (f"the tfdata package of {sys.executable} ({os.path.dirname(functions.__file__)}) speaks helper "
                f"protocol {_native.HELPER_PROTOCOL}, the worker {args.protocol}: install the tfdata package of the "
                f"tfdata binary's version for that interpreter")
        os.write(args.socket, ("error\n" + text).encode("utf-8", "replace"))
        return 1
    for module in args.module:
        try:
            _load(module)
        except BaseException:  # noqa: B036 - whatever the import raised goes to the worker
            text = f"importing {module} failed:\n{traceback.format_exc()}"
            os.write(args.socket, ("error\n" + text).encode("utf-8", "replace")[:60000])
            return 1
    os.write(args.socket, ("ok\n" + "\n".join(functions.registered_functions())).encode())
    _native.serve_functions(args.socket, args.request, args.response, functions._REGISTRY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
