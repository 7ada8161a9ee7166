#!/usr/bin/env python3
"""Produce fencestream pings from Python with kafka-python and protobuf.

What any producer must do (see the README, "Producing pings from another
language"):

  * topic ``pings``; key = the device id as UTF-8 bytes; value = a serialized
    ``fencestream.v1.Ping`` (codecs/proto/fencestream/v1/geofence.proto);
  * partition with Kafka's Java default, murmur2 of the key bytes: kafka-python's
    default partitioner is exactly that, so leave it alone;
  * ``device_time_ms`` = when the fix was taken (Unix ms), increasing per device;
  * ``hlc`` = 0 to let fencestream derive it from device_time_ms, or your own
    hybrid logical clock: (wall ms << 16) | counter, strictly increasing per
    device (``--stamp-hlc`` shows how).

Generate the protobuf module first (Debian: protobuf-compiler, python3-protobuf,
python3-kafka):

  protoc -I codecs/proto --python_out=/tmp/fspb codecs/proto/fencestream/v1/geofence.proto
  PYTHONPATH=/tmp/fspb python3 codecs/python/produce_pings.py --brokers 127.0.0.1:9092

Each acknowledged ping is printed as one JSON line: device, partition, offset,
device_time_ms, hlc.
"""

import argparse
import json
import math
import random
import sys
import time

from kafka import KafkaProducer

from fencestream.v1 import geofence_pb2

LOGICAL_BITS = 16  # topology/hlc: upper 48 bits wall ms, lower 16 a counter


class HLC:
    """A hybrid logical clock per process, as topology/hlc's Clock."""

    def __init__(self):
        self.last = 0

    def stamp(self, wall_ms):
        candidate = wall_ms << LOGICAL_BITS
        self.last = candidate if candidate > self.last else self.last + 1
        return self.last


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="127.0.0.1:9092", help="bootstrap servers, comma separated")
    ap.add_argument("--topic", default="pings")
    ap.add_argument("--device", action="append", default=[], help="device id (repeatable); default veh-py-0001...")
    ap.add_argument("--devices", type=int, default=5, help="how many devices when no --device is given")
    ap.add_argument("--count", type=int, default=10, help="pings per device")
    ap.add_argument("--interval-ms", type=int, default=1000, help="device time between a device's pings")
    ap.add_argument("--lat", type=float, default=52.5163, help="where the devices start")
    ap.add_argument("--lon", type=float, default=13.3777)
    ap.add_argument("--stamp-hlc", action="store_true", help="stamp our own HLC instead of sending 0")
    ap.add_argument("--compression", choices=["none", "gzip", "snappy"], default="none")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    devices = args.device or ["veh-py-%04d" % (i + 1) for i in range(args.devices)]
    rng = random.Random(args.seed)
    clock = HLC()
    producer = KafkaProducer(
        bootstrap_servers=args.brokers.split(","),
        client_id="fencestream-python-example",
        acks="all",
        compression_type=None if args.compression == "none" else args.compression,
        # The default partitioner is Kafka's murmur2, as fencestream's.
    )
    start_ms = int(time.time() * 1000) - args.count * args.interval_ms
    pos = {d: (args.lat, args.lon) for d in devices}
    sent = []
    for i in range(args.count):
        t_ms = start_ms + i * args.interval_ms
        for d in devices:
            lat, lon = pos[d]
            # A slow random walk, about 10 m per step.
            lat += rng.gauss(0, 10 / 111320)
            lon += rng.gauss(0, 10 / (111320 * math.cos(math.radians(lat))))
            pos[d] = (lat, lon)
            ping = geofence_pb2.Ping(
                device_id=d, lat=lat, lon=lon, accuracy_m=5.0, speed_mps=0.0,
                heading_deg=0.0, device_time_ms=t_ms,
                hlc=clock.stamp(t_ms) if args.stamp_hlc else 0,
            )
            fut = producer.send(args.topic, key=d.encode("utf-8"), value=ping.SerializeToString())
            sent.append((d, ping, fut))
    producer.flush()
    for d, ping, fut in sent:
        md = fut.get(timeout=30)
        print(json.dumps({"device": d, "partition": md.partition, "offset": md.offset,
                          "device_time_ms": ping.device_time_ms, "hlc": ping.hlc}, ensure_ascii=False))
    producer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
