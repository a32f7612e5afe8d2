#!/usr/bin/env python3
"""Reads a topic as a consumer of a schema registry would, with Confluent's own client:
every record's value (and key, with --avro-keys) is decoded by confluent-kafka's
deserializers, which fetch the writer's schema from the registry by the id in the
record. Prints one line per record, `key<TAB>value`, the value as compact JSON with
null fields left out (as Spark's to_json writes them), `<tombstone>` for none, and
timestamps as Spark renders them, so the lines compare with the JSON the same
pipeline writes.

    registry_consumer.py BOOTSTRAP TOPIC REGISTRY_URL avro|json-schema [--avro-keys] [--keep-nulls]
    registry_consumer.py BOOTSTRAP TOPIC REGISTRY_URL protobuf --proto FILE --message NAME
    (any of them with --registry-ca PEM --registry-basic USER:PASSWORD for a secured registry)

Protobuf needs the message's generated class, as a Protobuf consumer has: the .proto is
compiled with protoc (grpcio-tools) into a temporary folder first.
"""

import argparse
import base64
import datetime
import decimal
import importlib.util
import json
import math
import pathlib
import re
import sys
import tempfile

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def plain(value, keep_nulls):
    """The decoded value in JSON terms, as Spark's to_json renders it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: plain(v, keep_nulls) for k, v in value.items() if keep_nulls or v is not None}
    if isinstance(value, list):
        return [plain(v, keep_nulls) for v in value]
    if isinstance(value, tuple):
        return [plain(v, keep_nulls) for v in value]
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}" + ("Z" if value.tzinfo else "")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def imported_files(proto):
    """`proto` and the files it imports from its folder, transitively (Protobuf's
    well-known types come with protoc)."""
    files, todo = [], [proto]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        files.append(path)
        for name in re.findall(r'^\s*import\s+"([^"]+)"\s*;', path.read_text(), re.MULTILINE):
            if not name.startswith("google/protobuf/"):
                todo.append(proto.parent / name)
    return files


def protobuf_deserializer(proto, message):
    """Confluent's Protobuf deserializer for `message` of the .proto file `proto`,
    whose values come out as dicts under the .proto's field names."""
    from google.protobuf.json_format import MessageToDict
    from grpc_tools import protoc
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    proto = pathlib.Path(proto).resolve()
    out = tempfile.mkdtemp()
    files = imported_files(proto)
    if protoc.main(["protoc", f"-I{proto.parent}", f"--python_out={out}", *map(str, files)]) != 0:
        sys.exit(f"protoc could not compile {proto}")
    # The generated modules import each other by name.
    sys.path.insert(0, out)
    # protoc names the module after the file, `-` made `_`.
    generated = pathlib.Path(out) / (proto.stem.replace("-", "_") + "_pb2.py")
    spec = importlib.util.spec_from_file_location(generated.stem, generated)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    deserializer = ProtobufDeserializer(getattr(module, message.split(".")[-1]), {"use.deprecated.format": False})
    return lambda data, context: MessageToDict(deserializer(data, context), preserving_proto_field_name=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("registry")
    parser.add_argument("format", choices=["avro", "json-schema", "protobuf"])
    parser.add_argument("--avro-keys", action="store_true")
    parser.add_argument("--keep-nulls", action="store_true")
    parser.add_argument("--proto")
    parser.add_argument("--message")
    parser.add_argument("--registry-ca", help="PEM of the CA the registry's https certificate is from")
    parser.add_argument("--registry-basic", help="user:password for the registry")
    args = parser.parse_args()

    # Apicurio once left a request unanswered on a keep-alive connection (after a 404),
    # and without a timeout the test waited for ever; the client retries timed-out
    # requests (max.retries) on a new connection.
    registry_config = {"url": args.registry, "timeout": 10}
    if args.registry_ca:
        registry_config["ssl.ca.location"] = args.registry_ca
    if args.registry_basic:
        registry_config["basic.auth.user.info"] = args.registry_basic
    registry = SchemaRegistryClient(registry_config)
    if args.format == "avro":
        values = AvroDeserializer(registry)
    elif args.format == "json-schema":
        values = JSONDeserializer(None, schema_registry_client=registry)
    else:
        values = protobuf_deserializer(args.proto, args.message)
    keys = AvroDeserializer(registry) if args.avro_keys else None

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": f"registry-consumer-{args.topic}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(args.topic, 0, 0)])
    while True:
        message = consumer.poll(30)
        if message is None:
            sys.exit(f"{args.topic} was not read to its end within 30 s")
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                break
            sys.exit(f"consuming {args.topic} failed: {message.error()}")
        key = message.key()
        if keys is not None and key is not None:
            key = str(keys(key, SerializationContext(args.topic, MessageField.KEY)))
        elif key is not None:
            key = key.decode()
        if message.value() is None:
            value = "<tombstone>"
        else:
            decoded = values(message.value(), SerializationContext(args.topic, MessageField.VALUE))
            value = json.dumps(plain(decoded, args.keep_nulls), separators=(",", ":"), ensure_ascii=False)
        print(f"{key if key is not None else '<no key>'}\t{value}")
    consumer.close()


if __name__ == "__main__":
    main()
