"""Exactly-once distributed_epoch reads from Python: every element once, even when a worker dies
mid-epoch; pipelines and options that cannot give it are refused with the op named."""

import numpy as np
import pytest

import tfdata
from tfdata import Pipeline, fn
from conftest import Cluster


def _values(elements):
    return sorted(int(v) for e in elements for v in np.atleast_1d(e))


def test_every_element_once_with_a_seeded_shuffle_and_batches_within_splits(cluster2):
    p = Pipeline.range(3000).shuffle(64, seed=7).batch(10)
    batches = list(p.apply(tfdata.distribute("distributed_epoch", cluster2.target, exactly_once=True)))
    assert _values(batches) == list(range(3000))
    # range(3000) makes 64 splits of 47 elements: a batch never spans two.
    assert all(len({int(v) // 47 for v in b}) == 1 for b in batches)


def test_a_worker_that_dies_mid_epoch_loses_nothing():
    c = Cluster(num_workers=3, worker_timeout_ms=600)
    try:
        p = Pipeline.range(3200).map(fn.sleep(300)).shuffle(16, seed=3).batch(4)
        it = iter(p.apply(tfdata.distribute("distributed_epoch", c.target, exactly_once=True)))
        got = [next(it) for _ in range(50)]
        c.workers[1].stop()
        got += list(it)  # no DataLossWarning: the dead worker's splits are produced again
        assert _values(got) == list(range(3200))
        stats = it.stats()
        assert stats["splits_lost"] == 0
        assert stats["duplicates_dropped"] >= 0
    finally:
        c.stop()


def test_what_cannot_be_read_exactly_once_is_refused(cluster):
    with pytest.raises(tfdata.InvalidArgumentError, match=r"op 1 \(shuffle\).*seed"):
        next(iter(Pipeline.range(10).shuffle(4).apply(
            tfdata.distribute("distributed_epoch", cluster.target, exactly_once=True))))
    with pytest.raises(tfdata.InvalidArgumentError, match=r"op 1 \(take\)"):
        next(iter(Pipeline.range(10).take(3).apply(
            tfdata.distribute("distributed_epoch", cluster.target, exactly_once=True))))
    with pytest.raises(ValueError, match="exactly_once needs processing_mode distributed_epoch"):
        tfdata.from_dataset_id("parallel_epochs", cluster.target, "1", exactly_once=True)
    with pytest.raises(TypeError, match="exactly_once: expected a bool"):
        tfdata.from_dataset_id("distributed_epoch", cluster.target, "1", exactly_once=1)
