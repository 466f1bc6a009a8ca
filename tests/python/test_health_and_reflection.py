"""The standard gRPC health service and server reflection on `tfdata dispatcher` and `tfdata worker`
processes, called with the standard Python clients (grpcio-health-checking, grpcio-reflection):
what a Kubernetes probe and grpcurl-like tools do. The replay window (NOT_SERVING) is tested in
tests/health_test.cc, where the test can hold the dispatcher inside it."""

import os

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

import tfdata

SERVING = health_pb2.HealthCheckResponse.SERVING


def _health(address, service):
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10)


def test_health_of_dispatcher_and_worker(process_cluster, tmpdir_path):
    dispatcher = f"localhost:{process_cluster.port}"
    with open(os.path.join(tmpdir_path, "worker0.port")) as f:
        worker = f"localhost:{int(f.read())}"
    assert _health(dispatcher, "").status == SERVING
    assert _health(dispatcher, "tfdata.service.DispatcherService").status == SERVING
    assert _health(worker, "").status == SERVING
    assert _health(worker, "tfdata.service.WorkerService").status == SERVING
    with pytest.raises(grpc.RpcError) as e:
        _health(worker, "tfdata.service.DispatcherService")  # not this process's service
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_reflection_lets_a_generic_client_call_the_rpcs(process_cluster):
    dataset_id = tfdata.register_dataset(process_cluster.target, tfdata.Pipeline.range(5))
    with grpc.insecure_channel(f"localhost:{process_cluster.port}") as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = set(database.get_services())
        assert {"tfdata.service.DispatcherService", "grpc.health.v1.Health"} <= services
        # Everything below comes from the server's descriptors, as grpcurl would use them.
        method = DescriptorPool(database).FindServiceByName("tfdata.service.DispatcherService") \
            .methods_by_name["GetDataset"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        get_dataset = channel.unary_unary("/tfdata.service.DispatcherService/GetDataset",
                                          request_serializer=request_class.SerializeToString,
                                          response_deserializer=response_class.FromString)
        response = get_dataset(request_class(dataset_id=dataset_id), timeout=10)
        assert response.pipeline.op[0].range.stop == 5
        with pytest.raises(grpc.RpcError) as e:
            get_dataset(request_class(dataset_id="no-such-dataset"), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
