#!/usr/bin/python3
"""An independent reader of brigade's TensorBoard event files, for tensorboard_test.cc.

It knows nothing of brigade's code: it decodes the TFRecord framing itself, checks both masked
CRC-32C of every record with its own bitwise CRC (not a table), and parses each Event with the
protobuf classes that Debian's protoc generates from the published schema. It prints one JSON
object: {"records": n, "file_version": ..., "scalars": {tag: [[step, value], ...]},
"texts": {tag: text}, "session_starts": [step, ...]}. Exit 1 on any framing or CRC error.

usage: read_tensorboard.py PROTO_DIR EVENT_FILE
"""
import importlib
import json
import os
import struct
import subprocess
import sys
import tempfile


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def main():
    proto_dir, path = sys.argv[1], sys.argv[2]
    out_dir = tempfile.mkdtemp()
    subprocess.check_call(["protoc", "-I", proto_dir, "--python_out", out_dir,
                           os.path.join(proto_dir, "tensorboard_event.proto")])
    sys.path.insert(0, out_dir)
    pb = importlib.import_module("tensorboard_event_pb2")
    data = open(path, "rb").read()
    at, result = 0, {"records": 0, "scalars": {}, "texts": {}, "session_starts": []}
    while at < len(data):
        if at + 12 > len(data):
            sys.exit(f"truncated header at byte {at}")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if header_crc != masked(header):
            sys.exit(f"length CRC mismatch at byte {at}")
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if len(body) != length or body_crc != masked(body):
            sys.exit(f"data CRC mismatch at byte {at}")
        at += 16 + length
        event = pb.Event()
        event.ParseFromString(body)
        result["records"] += 1
        kind = event.WhichOneof("what")
        if kind == "file_version":
            result["file_version"] = event.file_version
        elif kind == "session_log":
            if event.session_log.status == pb.SessionLog.START:
                result["session_starts"].append(event.step)
        elif kind == "summary":
            for v in event.summary.value:
                if v.WhichOneof("value") == "simple_value":
                    result["scalars"].setdefault(v.tag, []).append([event.step, v.simple_value])
                elif v.metadata.plugin_data.plugin_name == "text":
                    result["texts"][v.tag] = v.tensor.string_val[0].decode()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
