#!/usr/bin/env python3
"""A gRPC client for `krender serve` that krender did not write.

The evaluator stubs are generated at run time with grpcio-tools from
proto/evaluator.proto into a temporary directory; health checks use
grpcio-health-checking's own stubs. Usage:

    serve-client.py ADDRESS PROTO_DIR PLAN.json
    serve-client.py --forward ADDRESS PROTO_DIR IMAGE

The second form is a KRM function for `krender fn eval --exec`: it sends
its stdin to the server as the resource_list of IMAGE and writes the
answer's resource_list to stdout and its log to stderr (exit 1 on an error
status), as Porch's gRPC function runner client does.

PLAN is a list of operations, run in order:
    {"op": "call", "image": IMG, "input": FILE, "out": PREFIX, "timeout": SECONDS}
        writes PREFIX.yaml (resource_list) and PREFIX.log (log) on success
    {"op": "health", "service": NAME}
Prints one JSON object per operation (a list): {"code": STATUS, "details": TEXT}
(plus "status" for health).
"""

import json
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def load_stubs(proto_dir, out_dir):
    status = protoc.main([
        "protoc",
        f"-I{proto_dir}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        os.path.join(proto_dir, "evaluator.proto"),
    ])
    if status != 0:
        sys.exit(f"grpc_tools.protoc failed with {status}")
    sys.path.insert(0, out_dir)
    import evaluator_pb2
    import evaluator_pb2_grpc
    return evaluator_pb2, evaluator_pb2_grpc


def forward(address, proto_dir, image):
    data = sys.stdin.buffer.read()
    with tempfile.TemporaryDirectory() as out_dir:
        pb2, pb2_grpc = load_stubs(proto_dir, out_dir)
        channel = grpc.insecure_channel(address)
        try:
            response = pb2_grpc.FunctionEvaluatorStub(channel).EvaluateFunction(
                pb2.EvaluateFunctionRequest(resource_list=data, image=image), timeout=60)
        except grpc.RpcError as error:
            sys.stderr.write(f"{error.code().name}: {error.details()}\n")
            sys.exit(1)
    sys.stdout.buffer.write(response.resource_list)
    sys.stderr.buffer.write(response.log)


def main():
    if sys.argv[1] == "--forward":
        forward(*sys.argv[2:5])
        return
    address, proto_dir, plan_path = sys.argv[1:4]
    with open(plan_path) as f:
        plan = json.load(f)
    with tempfile.TemporaryDirectory() as out_dir:
        pb2, pb2_grpc = load_stubs(proto_dir, out_dir)
        limit = 64 * 1024 * 1024
        channel = grpc.insecure_channel(address, options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", limit),
        ])
        evaluator = pb2_grpc.FunctionEvaluatorStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        results = []
        for op in plan:
            result = {}
            try:
                if op["op"] == "call":
                    with open(op["input"], "rb") as f:
                        data = f.read()
                    request = pb2.EvaluateFunctionRequest(resource_list=data, image=op["image"])
                    response = evaluator.EvaluateFunction(request, timeout=op.get("timeout", 60))
                    with open(op["out"] + ".yaml", "wb") as f:
                        f.write(response.resource_list)
                    with open(op["out"] + ".log", "wb") as f:
                        f.write(response.log)
                elif op["op"] == "health":
                    response = health.Check(health_pb2.HealthCheckRequest(service=op["service"]), timeout=10)
                    result["status"] = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
                else:
                    sys.exit(f"unknown op {op['op']!r}")
                result["code"] = "OK"
                result["details"] = ""
            except grpc.RpcError as error:
                result["code"] = error.code().name
                result["details"] = error.details() or ""
            results.append(result)
        print(json.dumps(results))


if __name__ == "__main__":
    main()
