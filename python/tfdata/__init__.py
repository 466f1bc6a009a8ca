"""tfdata: a disaggregated input-data service for machine learning, from Python.

The same API as tf.data.experimental.service, without TensorFlow::

    import tfdata
    dispatcher = tfdata.DispatchServer()
    worker = tfdata.WorkerServer(tfdata.WorkerConfig(dispatcher_address=dispatcher.target))
    dataset = tfdata.Dataset.range(10)
    dataset = dataset.apply(tfdata.distribute(processing_mode="parallel_epochs", service=dispatcher.target))
    print(list(dataset.as_numpy_iterator()))   # [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]

See docs/python.md for the API reference.
"""

from tfdata import errors, io
from tfdata._native import set_log_level
from tfdata.functions import function, py, register_function, registered_functions
from tfdata.errors import *  # noqa: F401,F403 - the exception classes, as tfdata.NotFoundError etc.
from tfdata.pipeline import (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, FeatureSpec, Function, Pipeline,
                             TensorSpec, fn, message, tensor_value)
from tfdata.servers import DispatcherConfig, DispatchServer, WorkerConfig, WorkerServer, set_client_security
from tfdata.service import (CrossTrainerCache, DistributedDataset, ShardingPolicy, distribute, from_dataset_id,
                            register_dataset)

# tf.data's name for a pipeline, so that code written for tf.data reads the same.
Dataset = Pipeline

__version__ = "0.1.0"
