"""Feeding JAX: elements arrive as numpy arrays over the received buffers; jax.device_put moves
them to the device.

Where the copy happens: tfdata itself copies nothing (the array aliases the gRPC message). On an
accelerator, jax.device_put is the one host-to-device copy. On the CPU backend, device_put may
alias a suitably aligned numpy array or copy it into a JAX buffer; either way it is the only place.
Prefetch a step ahead (keep the next batch's device_put in flight) to overlap it with compute.

    pip install jax && python examples/python/jax_feed.py
"""
import sys

import tfdata

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    sys.exit("this example needs jax: pip install jax")


def main():
    dispatcher = tfdata.DispatchServer(host="127.0.0.1")
    worker = tfdata.WorkerServer(dispatcher, host="127.0.0.1", heartbeat_interval_ms=100)
    pipeline = tfdata.Pipeline.range(64).map(tfdata.fn.cast("float32")).batch(16)
    dataset = pipeline.apply(tfdata.distribute("parallel_epochs", dispatcher.target))
    device = jax.devices()[0]
    total = 0.0
    for batch in dataset:                       # numpy float32[16], no copy so far
        x = jax.device_put(batch, device)       # the copy to the device (if any) is here
        total += float(jnp.sum(x * 2))
    print(f"sum of 2x over range(64) on {device.platform}: {total}")
    worker.stop()
    dispatcher.stop()


if __name__ == "__main__":
    main()
