"""tf.data service's seed example, with tfdata in place of tf.data.experimental.service.

    python examples/python/seed.py
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
"""
import tfdata

dispatcher = tfdata.DispatchServer()
dispatcher_address = dispatcher.target.split("://")[1]
worker = tfdata.WorkerServer(tfdata.WorkerConfig(dispatcher_address=dispatcher_address))
dataset = tfdata.Dataset.range(10)
dataset = dataset.apply(tfdata.distribute(processing_mode="parallel_epochs", service=dispatcher.target))
print(list(dataset.as_numpy_iterator()))
