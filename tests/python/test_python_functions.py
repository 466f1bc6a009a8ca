"""Python functions on workers (issue 23): registered by name, called from pipelines, in process and
on `tfdata worker --python-module` processes; element types in and out; errors, crashes, hangs."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tfdata
from conftest import HERE, ProcessCluster, tfdata_binary

MODULE = os.path.join(HERE, "fixtures", "py_functions.py")


# ---- in process ------------------------------------------------------------------------------------

@tfdata.function("t_double")
def t_double(x):
    return x * 2


@tfdata.function("t_even")
def t_even(x):
    return x % 2 == 0


@tfdata.function("t_raises")
def t_raises(x):
    if x == 2:
        raise KeyError(f"no key {x}")
    return x


def test_in_process_map_and_filter_by_function_and_by_name():
    p = tfdata.Pipeline.range(8).map(t_double).filter(tfdata.py("t_even")).map(tfdata.py("t_double"))
    assert "python" in p.to_text() and "t_double" in p.to_text()
    assert list(p.run()) == [0, 4, 8, 12, 16, 20, 24, 28]


def test_in_process_parallel_map_keeps_order():
    p = tfdata.Pipeline.range(500).map(t_double, num_parallel_calls=4)
    assert list(p.run()) == [2 * i for i in range(500)]


@pytest.mark.parametrize("value, check", [
    (np.arange(6, dtype=np.float32).reshape(2, 3), lambda v: v.dtype == np.float32 and v.shape == (2, 3)),
    (np.arange(6, dtype=np.int16)[::2], lambda v: list(v) == [0, 2, 4]),  # strided: copied contiguous
    (np.array([True, False]), lambda v: v.dtype == np.bool_),
    (np.uint64(7), lambda v: v == 7),
    (np.array([b"a", b"bc"], dtype=object), lambda v: list(v) == [b"a", b"bc"]),
    (np.array(["x", "yz"]), lambda v: list(v) == [b"x", b"yz"]),
    (3, lambda v: v == 3),
    (2.5, lambda v: v == 2.5),
    (True, lambda v: v is True),
    (b"raw", lambda v: v == b"raw"),
    ("text", lambda v: v == b"text"),
])
def test_in_process_every_return_type_becomes_an_element(value, check):
    tfdata.register_function(f"t_const_{id(value)}", lambda x, value=value: value)
    (got,) = list(tfdata.Pipeline.range(1).map(tfdata.py(f"t_const_{id(value)}")).run())
    assert check(got), got


def test_in_process_tuples_and_dicts_become_components():
    tfdata.register_function("t_tuple", lambda x: (np.full((2,), x, np.int32), x, b"b"))
    tfdata.register_function("t_dict", lambda x: {"a": x, "b": np.zeros((1, 2))})
    (t,) = list(tfdata.Pipeline.range(1).map(tfdata.py("t_tuple")).run())
    assert len(t) == 3 and list(t[0]) == [0, 0] and t[1] == 0 and t[2] == b"b"
    (d,) = list(tfdata.Pipeline.range(1).map(tfdata.py("t_dict")).run())
    assert d[0] == 0 and d[1].shape == (1, 2)


def test_in_process_output_names_name_the_components():
    fn = tfdata.register_function("t_named", lambda x: {"b": x * 2, "a": x}, output_names=("a", "b"))
    # By name without output_names: a tuple of the dict's values, in the dict's order.
    assert list(tfdata.Pipeline.range(3).map(tfdata.py("t_named")).run()) == [(0, 0), (2, 1), (4, 2)]
    for named in [tfdata.Pipeline.range(3).map(tfdata.py("t_named", output_names=["a", "b"])),
                  tfdata.Pipeline.range(3).map(fn)]:  # the registered function brings its output_names
        assert "output_names" in named.to_text()
        assert list(named.run()) == [{"a": i, "b": 2 * i} for i in range(3)]
    with pytest.raises(tfdata.InvalidArgumentError, match=r"returned tuple: a tuple of 3 where output_names are 2"):
        tfdata.register_function("t_three", lambda x: (x, x, x))
        list(tfdata.Pipeline.range(1).map(tfdata.py("t_three", output_names=["a", "b"])).run())
    with pytest.raises(ValueError, match="distinct"):
        tfdata.py("t_named", output_names=["a", "a"])
    with pytest.raises(TypeError, match="list of non-empty str"):
        tfdata.py("t_named", output_names="ab")


def test_in_process_the_function_receives_numpy_views_and_tuples():
    seen = []
    tfdata.register_function("t_seen", lambda x: seen.append(x) or 0)
    pipeline = tfdata.Pipeline.from_tensor_slices(np.arange(6, dtype=np.float32).reshape(3, 2), np.arange(3))
    list(pipeline.map(tfdata.py("t_seen")).run())
    assert len(seen) == 3 and isinstance(seen[0], tuple)
    arr, label = seen[1]
    assert isinstance(arr, np.ndarray) and list(arr) == [2.0, 3.0] and label == 1
    assert not arr.flags.writeable  # in process the input may be shared (a cache upstream)
    seen.clear()  # the registry keeps the function (and what it holds) until exit


def _examples_file(tmp):
    path = os.path.join(tmp, "examples.tfrecord")
    tfdata.io.write_tfrecord(path, [tfdata.io.example(label=i, text=b"w%d" % i) for i in range(3)])
    return path


def _parsed(path):
    return tfdata.Pipeline.tfrecord(path).map(tfdata.fn.parse_example({"label": "int64", "text": "string"}))


def test_in_process_a_function_receives_a_dict_by_feature_name(tmpdir_path):
    seen = []
    tfdata.register_function("t_dict_in", lambda d: seen.append(sorted(d)) or d["label"] * 10)
    got = list(_parsed(_examples_file(tmpdir_path)).map(tfdata.py("t_dict_in")).run())
    assert got == [0, 10, 20] and seen == [["label", "text"]] * 3


def test_in_process_errors_name_the_function_type_and_frames():
    with pytest.raises(tfdata.InvalidArgumentError) as e:
        list(tfdata.Pipeline.range(5).map(tfdata.py("t_raises")).run())
    text = str(e.value)
    assert "python function 't_raises' (element 2) raised KeyError" in text and "no key 2" in text
    assert "in t_raises" in text  # a frame of the traceback
    tfdata.register_function("t_set", lambda x: {x})
    with pytest.raises(tfdata.InvalidArgumentError, match=r"'t_set' \(element 0\) returned set: it cannot become"):
        list(tfdata.Pipeline.range(4, 8).map(tfdata.py("t_set")).run())
    tfdata.register_function("t_list", lambda x: [x, x])
    with pytest.raises(tfdata.InvalidArgumentError, match="flat_map"):
        list(tfdata.Pipeline.range(1).map(tfdata.py("t_list")).run())
    with pytest.raises(tfdata.InvalidArgumentError, match="must return a bool"):
        list(tfdata.Pipeline.range(1).filter(tfdata.py("t_double")).run())


def test_in_process_flat_map_turns_each_element_into_a_list():
    tfdata.register_function("t_split", lambda x: [x] * x)
    assert list(tfdata.Pipeline.range(4).flat_map(tfdata.py("t_split")).run()) == [1, 2, 2, 3, 3, 3]
    # C++ functions may come first; the last must be Python.
    got = list(tfdata.Pipeline.range(3).flat_map(tfdata.fn.arith("add", 1), tfdata.py("t_split")).run())
    assert got == [1, 2, 2, 3, 3, 3]
    with pytest.raises(tfdata.InvalidArgumentError, match="last `fn` must be a python function"):
        tfdata.Pipeline.range(3).flat_map(tfdata.fn.arith("add", 1)).validate()
    with pytest.raises(tfdata.InvalidArgumentError, match="'t_double' \\(element 0\\) returned int to flat_map"):
        list(tfdata.Pipeline.range(3).flat_map(tfdata.py("t_double")).run())


def test_in_process_a_function_not_loaded_and_an_unregistered_callable():
    with pytest.raises(tfdata.FailedPreconditionError, match="'t_missing' is not loaded in this process"):
        list(tfdata.Pipeline.range(1).map(tfdata.py("t_missing")).run())
    with pytest.raises(TypeError, match="not registered"):
        tfdata.Pipeline.range(1).map(lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        tfdata.register_function("t_double", lambda x: x)
    with pytest.raises(ValueError, match="name must be"):
        tfdata.register_function("bad name", lambda x: x)


def test_worker_server_in_process_runs_functions_registered_here(cluster):
    ds = tfdata.Pipeline.range(10).map(tfdata.py("t_double")).apply(
        tfdata.distribute(processing_mode="parallel_epochs", service=cluster.target))
    assert sorted(ds.as_numpy_iterator()) == [2 * i for i in range(10)]


# ---- workers started by the CLI with --python-module ---------------------------------------------

def _read(target, pipeline):
    ds = pipeline.apply(tfdata.distribute(processing_mode="parallel_epochs", service=target))
    return list(ds.as_numpy_iterator())


@pytest.fixture
def python_cluster(tmpdir_path):
    c = ProcessCluster(tmpdir_path, worker_args=["--python-module", MODULE, "--python", sys.executable,
                                                 "--python-helpers", "2", "--python-call-timeout", "3s"])
    yield c
    c.stop()


def test_cli_worker_runs_module_functions_in_parallel(python_cluster):
    got = _read(python_cluster.target, tfdata.Pipeline.range(200).map(tfdata.py("double"), num_parallel_calls=2))
    assert sorted(got) == [2 * i for i in range(200)]
    images = _read(python_cluster.target, tfdata.Pipeline.range(3).map(tfdata.py("image")))
    for img, label, name in sorted(images, key=lambda t: t[1]):
        assert img.shape == (4, 5, 3) and img.dtype == np.uint8 and (img == label).all()
        assert name == b"img%d" % label
    flipped = _read(python_cluster.target, tfdata.Pipeline.from_tensor_slices(
        np.arange(12, dtype=np.int64).reshape(2, 2, 3), np.array([5, 6])).map(tfdata.py("flip")))
    assert [list(f[0][0]) for f in flipped] == [[2, 1, 0], [8, 7, 6]] and [f[1] for f in flipped] == [6, 7]
    kinds = _read(python_cluster.target, tfdata.Pipeline.from_tensor_slices(np.zeros((1, 2, 2), np.float32))
                  .map(tfdata.py("describe")))
    assert kinds == [b"ndarray float32 (2, 2)"]
    assert sorted(_read(python_cluster.target, tfdata.Pipeline.range(6).filter(tfdata.py("is_even")))) == [0, 2, 4]
    flat = _read(python_cluster.target, tfdata.Pipeline.range(4).flat_map(tfdata.py("repeat_n")))
    assert flat == [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2)]


def test_cli_worker_results_held_long_keep_their_values(python_cluster):
    # The worker's tensors alias the helpers' response regions; a shuffle buffer holds many of them
    # while later calls run: none may be overwritten.
    pipeline = tfdata.Pipeline.range(300).map(tfdata.py("big"), num_parallel_calls=2).shuffle(300, seed=1)
    ds = pipeline.apply(tfdata.distribute(processing_mode="parallel_epochs", service=python_cluster.target))
    seen = set()
    for a in ds.as_numpy_iterator():
        assert a.shape == (256, 256) and (a == a.flat[0]).all(), a.flat[0]
        seen.add(int(a.flat[0]))
    assert seen == set(range(300))


def test_cli_worker_filter_and_flat_map_in_chunks_keep_order_and_errors(python_cluster):
    # Inputs reach filter's and flat_map's Python functions in chunks; the order and the place of
    # an error stay what they were one element at a time.
    def read_until_error(iterable):
        got = []
        with pytest.raises(tfdata.InvalidArgumentError, match=r"\(element 41\) raised ValueError: 41 is bad"):
            for x in iterable:
                got.append(x)
        return got
    pipeline = tfdata.Pipeline.range(100).filter(tfdata.py("even_or_raise"))
    # In process, every element before the error arrives; through the service, the task's error
    # may overtake elements still in the worker's buffer, never come before a later one.
    tfdata.register_function("even_or_raise", lambda x: (_ for _ in ()).throw(ValueError("41 is bad"))
                             if x == 41 else x % 2 == 0)
    assert read_until_error(pipeline.run()) == list(range(0, 41, 2))
    got = read_until_error(pipeline.apply(
        tfdata.distribute(processing_mode="parallel_epochs", service=python_cluster.target)).as_numpy_iterator())
    assert got == list(range(0, 41, 2))[:len(got)]
    assert _read(python_cluster.target, tfdata.Pipeline.range(300).filter(tfdata.py("is_even"))) == \
        list(range(0, 300, 2))
    flat = _read(python_cluster.target, tfdata.Pipeline.range(40).flat_map(tfdata.py("repeat_n")))
    assert flat == [(x, i) for x in range(40) for i in range(x)]


def test_cli_worker_output_names_give_trainers_a_dict(python_cluster):
    got = _read(python_cluster.target,
                tfdata.Pipeline.range(4).map(tfdata.py("named", output_names=["id", "square"])))
    assert sorted(got, key=lambda d: d["id"]) == [{"id": i, "square": i * i} for i in range(4)]
    with pytest.raises(tfdata.InvalidArgumentError,
                       match=r"'named' \(element 0\) returned dict: a dict with keys \['square', 'id'\] where "
                             r"output_names are \[a, b\]"):
        _read(python_cluster.target, tfdata.Pipeline.range(2).map(tfdata.py("named", output_names=["a", "b"])))
    # A result that cannot be an element fails its own input, not the helper.
    with pytest.raises(tfdata.InvalidArgumentError,
                       match=r"python function 'deep' \(element 1\) returned an element that cannot be passed on: "
                             r".*rank exceeds 32"):
        _read(python_cluster.target, tfdata.Pipeline.range(3).map(tfdata.py("deep")))
    assert _read(python_cluster.target, tfdata.Pipeline.range(1).map(tfdata.py("deep"))) == [0]


def test_cli_worker_errors_crashes_and_hangs_fail_the_read_not_the_worker(python_cluster):
    with pytest.raises(tfdata.InvalidArgumentError) as e:
        _read(python_cluster.target, tfdata.Pipeline.range(5).map(tfdata.py("raises")))
    assert "python function 'raises' (element 3) raised ValueError: element 3 is bad" in str(e.value)
    assert "py_functions.py" in str(e.value)  # the frame where it was raised
    with pytest.raises(tfdata.Error, match=r"died from signal 11"):
        _read(python_cluster.target, tfdata.Pipeline.range(5).map(tfdata.py("crashes")))
    with pytest.raises(tfdata.Error, match=r"did not return within 3s \(--python-call-timeout\)"):
        _read(python_cluster.target, tfdata.Pipeline.range(5).map(tfdata.py("hangs")))
    with pytest.raises(tfdata.FailedPreconditionError, match=r"'missing' is not loaded on worker localhost:\d+"):
        _read(python_cluster.target, tfdata.Pipeline.range(5).map(tfdata.py("missing")))
    # The worker lives, and its helpers were replaced: the next job runs.
    assert sorted(_read(python_cluster.target, tfdata.Pipeline.range(5).map(tfdata.py("double")))) == \
        [0, 2, 4, 6, 8]
    assert all(p.poll() is None for p in python_cluster.procs)


def test_cli_worker_function_receives_a_dict_by_feature_name(python_cluster, tmpdir_path):
    got = _read(python_cluster.target, _parsed(_examples_file(tmpdir_path)).map(tfdata.py("label_and_text")))
    assert sorted(got) == [b"0:w0", b"1:w1", b"2:w2"]


def _children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def test_cli_worker_killed_takes_its_helpers_with_it(python_cluster):
    worker = python_cluster.procs[1]
    assert sorted(_read(python_cluster.target, tfdata.Pipeline.range(4).map(tfdata.py("double")))) == [0, 2, 4, 6]
    helpers = _children(worker.pid)
    assert len(helpers) == 2 and all(_alive(h) for h in helpers)
    worker.kill()  # SIGKILL: nothing of the worker's runs to stop them
    worker.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(h) for h in helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(h) for h in helpers)


def test_helper_of_another_protocol_version_refuses_with_a_clear_error():
    import socket
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        fd = theirs.fileno()
        helper = subprocess.run(
            [sys.executable, "-m", "tfdata._helper", "--socket", str(fd), "--request", str(fd), "--response", str(fd),
             "--protocol", "999", "--parent", str(os.getpid())], pass_fds=[fd], timeout=60, capture_output=True)
        assert helper.returncode == 1, helper.stderr
        hello = ours.recv(65536).decode()
    assert hello.startswith("error\n") and "speaks helper protocol" in hello and "the worker 999" in hello


def test_cli_worker_without_modules_says_how_to_load_one(process_cluster):
    with pytest.raises(tfdata.FailedPreconditionError, match="it loads no Python modules"):
        _read(process_cluster.target, tfdata.Pipeline.range(3).map(tfdata.py("double")))


def _run(args, timeout=60):
    return subprocess.run([tfdata_binary()] + args, capture_output=True, text=True, timeout=timeout)


def test_cli_run_with_a_module_and_startup_errors(tmpdir_path):
    path = os.path.join(tmpdir_path, "p.pbtxt")
    with open(path, "w") as f:
        f.write('op { range { stop: 4 } } op { map { fn { python { name: "double" } } } }')
    ok = _run(["run", path, "--python-module", MODULE, "--python", sys.executable])
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["0", "2", "4", "6"]
    # No interpreter there: a clear error, as a build without Python would give.
    missing = _run(["run", path, "--python-module", MODULE, "--python", "/nonexistent/python3"])
    assert missing.returncode != 0 and "could not start" in missing.stderr and "--python" in missing.stderr
    bad = os.path.join(tmpdir_path, "bad_module.py")
    with open(bad, "w") as f:
        f.write("import tfdata\nraise RuntimeError('cannot load me')\n")
    failed = _run(["run", path, "--python-module", bad, "--python", sys.executable])
    assert failed.returncode != 0 and "importing" in failed.stderr and "cannot load me" in failed.stderr
    worker = _run(["worker", "--dispatcher", "127.0.0.1:1", "--python-module", bad, "--python", sys.executable])
    assert worker.returncode != 0 and "cannot load me" in worker.stderr


def test_examples_run_and_the_python_tokenizer_matches_the_builtin_one():
    module = os.path.join("examples", "python", "functions.py")
    doubled = subprocess.run([tfdata_binary(), "run", "examples/python_map.pbtxt", "--python-module", module,
                              "--python", sys.executable], capture_output=True, text=True, timeout=60,
                             cwd=os.path.dirname(os.path.dirname(HERE)))
    assert doubled.returncode == 0, doubled.stderr
    assert doubled.stdout.split() == ["0", "2", "4", "6"]  # as docs/pipeline.md shows
    runs = [subprocess.run([tfdata_binary(), "run", f"examples/{name}.pbtxt", *extra], capture_output=True,
                           text=True, timeout=60, cwd=os.path.dirname(os.path.dirname(HERE)))
            for name, extra in [("python_tokenize", ["--python-module", module, "--python", sys.executable]),
                                ("text_tokenize", [])]]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("\n") == 2
