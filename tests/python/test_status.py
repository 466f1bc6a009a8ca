"""The dispatcher's status: `tfdata status` (table, --json, --watch), the status page at / and
/status.json on its --metrics-port, all from one GetStatus; the live worker estimate from a real
read (a fast reader of a sleep-bound pipeline asks for more workers, a slow one does not); and the
page loaded in a real browser (headless Chromium), its DOM checked for what the test started."""

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

import tfdata
from conftest import ProcessCluster, tfdata_binary


def _status(c, *args, check=True):
    r = subprocess.run([c.binary, "status", "--dispatcher", c.target, *args], capture_output=True, text=True,
                       timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def _get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.headers["Content-Type"], r.read().decode()


def _register(c, tmp, text, name):
    path = os.path.join(tmp, f"{name}.pbtxt")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([c.binary, "register", path, "--dispatcher", c.target], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _read_for(it, seconds, pause=0.0, limit=100000):
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end and n < limit:
        try:
            next(it)
        except StopIteration:
            break
        n += 1
        if pause:
            time.sleep(pause)
    return n


def _job(status, name):
    jobs = [j for j in status["jobs"] if j["name"] == name]
    assert len(jobs) == 1, status["jobs"]
    return jobs[0]


@pytest.fixture
def status_cluster(tmpdir_path):
    port_file = os.path.join(tmpdir_path, "dm.port")
    c = ProcessCluster(tmpdir_path, num_workers=2,
                       dispatcher_args=["--metrics-port", "0", "--metrics-port-file", port_file])
    c.metrics_port = int(ProcessCluster._read_port(port_file))
    yield c
    c.stop()


def test_a_fast_reader_of_a_sleep_bound_pipeline_asks_for_more_workers(status_cluster, tmpdir_path):
    c = status_cluster
    slow = _register(c, tmpdir_path, "op { range { stop: 1000000 } } op { map { fn { sleep { micros: 2000 } } } }",
                     "slow")
    fast = _register(c, tmpdir_path, "op { range { stop: 1000000 } }", "fast")
    # A reader that only reads, of a pipeline that sleeps 2 ms an element: it waits nearly always.
    hungry = iter(tfdata.from_dataset_id("parallel_epochs", c.target, slow, job_name="hungry"))
    _read_for(hungry, 1.5)
    stats = hungry.stats()
    assert stats["stall_fraction"] > 0.5, stats
    assert 0 < stats["wait_seconds"] <= stats["elapsed_seconds"]
    time.sleep(0.5)  # a heartbeat carries the last reads
    status = json.loads(_status(c, "--json").stdout)
    assert len(status["workers"]) == 2 and all(w["state"] == "alive" for w in status["workers"])
    h = _job(status, "hungry")
    assert h["workers"] == 2 and h["readers"] == 1
    assert h["stall_fraction"] > 0.5 and h["workers_recommended"] > 2, h
    assert h["elements_per_second"] > 0
    _, metrics = _get(c.metrics_port, "/metrics")
    line = next(l for l in metrics.splitlines() if l.startswith('tfdata_job_workers_recommended{job="hungry"'))
    assert float(line.rsplit(" ", 1)[1]) > 2
    hungry.close()

    # A reader that takes 10 ms an element, of a fast pipeline: it never waits.
    fed = iter(tfdata.from_dataset_id("parallel_epochs", c.target, fast, job_name="fed"))
    # Long enough that the wait for the first element (heartbeats of 100-200 ms) stays a few percent.
    _read_for(fed, 5.0, pause=0.01)
    stats = fed.stats()
    assert stats["stall_fraction"] < 0.1, stats
    time.sleep(0.5)
    f = _job(json.loads(_status(c, "--json").stdout), "fed")
    assert f["workers"] == 2 and f["stall_fraction"] < 0.1 and f["workers_recommended"] == 2, f
    assert f["elements_per_second"] > 0
    # The same numbers through the page's JSON and the gauge an autoscaler reads.
    ctype, body = _get(c.metrics_port, "/status.json")
    assert ctype == "application/json"
    assert _job(json.loads(body), "fed")["workers_recommended"] == 2
    _, metrics = _get(c.metrics_port, "/metrics")
    assert 'tfdata_job_workers_recommended{job="fed",mode="parallel_epochs"} 2\n' in metrics
    fed.close()


def test_status_table_watch_and_errors(status_cluster, tmpdir_path):
    c = status_cluster
    ds = _register(c, tmpdir_path, "op { range { stop: 100000 } } op { batch { batch_size: 4 } }", "batched")
    it = iter(tfdata.from_dataset_id("distributed_epoch", c.target, ds, job_name="epoch-job"))
    _read_for(it, 0.3, limit=100)
    text = _status(c).stdout
    status = json.loads(_status(c, "--json").stdout)
    for w in status["workers"]:
        assert w["address"] in text
    assert "WORKERS (2)" in text and "DATASETS (1)" in text and "JOBS (1)" in text
    assert "epoch-job" in text and "distributed_epoch" in text and "range -> batch" in text
    job = _job(status, "epoch-job")
    assert 0 < int(job["splits_handed_out"]) <= int(job["splits_per_epoch"])
    # The reader fetches on meanwhile: the text's count is the JSON's or later.
    handed = re.search(r"epoch 0: (\d+) / (\d+) splits", text)
    assert handed and handed.group(2) == str(job["splits_per_epoch"]), text
    assert 0 < int(handed.group(1)) <= int(job["splits_per_epoch"])

    watched = _status(c, "--watch", "--interval", "0.2", "--count", "3").stdout
    assert watched.count("WORKERS (2)") == 3
    lines = _status(c, "--json", "--watch", "--interval", "0.1", "--count", "2").stdout.strip().splitlines()
    assert len(lines) == 2 and all(json.loads(l)["jobs"] for l in lines)

    bad = _status(c, "--interval", "0", check=False)
    assert bad.returncode == 2 and "--interval" in bad.stderr
    r = subprocess.run([c.binary, "status", "--dispatcher", "127.0.0.1:1"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "127.0.0.1:1" in r.stderr
    it.close()


def test_status_page_over_http(status_cluster, tmpdir_path):
    c = status_cluster
    ds = _register(c, tmpdir_path, "op { range { stop: 1000 } }", "small")
    it = iter(tfdata.from_dataset_id("parallel_epochs", c.target, ds, job_name="page<job>"))
    _read_for(it, 0.2, limit=10)
    ctype, page = _get(c.metrics_port, "/")
    assert ctype.startswith("text/html")
    status = json.loads(_get(c.metrics_port, "/status.json")[1])
    for w in status["workers"]:
        assert f'data-address="{w["address"]}"' in page
    assert f'data-job="{_job(status, "page<job>")["id"]}"' in page
    assert "page&lt;job&gt;" in page and "page<job>" not in page
    it.close()


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_status_page_in_a_real_browser(status_cluster, tmpdir_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium: scripts/install-deps.sh installs it with TFDATA_WITH_BROWSER=1 (scripts/test.sh does)")
    c = status_cluster
    ds = _register(c, tmpdir_path, "op { range { stop: 1000000 } } op { map { fn { sleep { micros: 1000 } } } }",
                   "browsed")
    it = iter(tfdata.from_dataset_id("parallel_epochs", c.target, ds, job_name="browser-job"))
    _read_for(it, 1.0)
    status = json.loads(_get(c.metrics_port, "/status.json")[1])
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={os.path.join(tmpdir_path, 'chromium')}", "--virtual-time-budget=2000"]
    url = f"http://127.0.0.1:{c.metrics_port}/"
    r = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    # What the browser parsed: the tables with the workers and the job this test started.
    assert '<table id="workers">' in dom and '<table id="jobs">' in dom
    for w in status["workers"]:
        assert f'data-address="{w["address"]}"' in dom
    job = _job(status, "browser-job")
    assert f'data-job="{job["id"]}"' in dom
    assert "browser-job" in dom
    # docs/operations.md shows this screenshot when TFDATA_STATUS_SCREENSHOT names where to keep it.
    shot = os.environ.get("TFDATA_STATUS_SCREENSHOT")
    if shot:
        subprocess.run(args + ["--window-size=1400,700", f"--screenshot={shot}", url], capture_output=True,
                       timeout=120, check=True)
        assert os.path.getsize(shot) > 0
    it.close()
