#!/usr/bin/env python3
"""Writes src/cel/libraries/time_zones.bin: the IANA time zones a CEL
timestamp getter can name (`getHours('Europe/Berlin')`), read by
src/cel/libraries/time_zones.rs.

Input: the zoneinfo directory of PyPI's `tzdata` package (the IANA database
compiled to TZif, with its `zones` list), pinned so the output is
reproducible:

    pip download tzdata==2026.6 --no-deps -d /tmp/tzdata && unzip -q /tmp/tzdata/*.whl -d /tmp/tzdata
    python3 tools/time-zones.py /tmp/tzdata/tzdata [--cases cases.json]

`--cases` also writes offsets Python's zoneinfo gives for the same files
(every transition since 1970, a second either side, and times spread over
1970-2100 and up to 9999), which the ignored test `time_zone_conformance` compares with
the module's reading:
    TIME_ZONE_CASES=cases.json cargo test --lib time_zone_conformance -- --ignored

What is kept: every zone's UTC offsets from 1970 on, exactly; before 1970,
the offset in effect at 1970-01-01T00:00Z. A zone's transitions are kept as
the TZif file lists them, until its last one, and after it the file's
footer rule (a POSIX TZ string, RFC 8536) gives them, as it does in the
file. Abbreviations and the DST flag are not kept: CEL's getters read only
the offset.

The blob is several raw deflate streams, so that a lookup inflates the index
and one chunk of records (about a third of the whole), not the whole table:
  varint stream count S, then S varints: each stream's compressed length,
  then the streams. Inside them, little-endian, varints as in LEB128 (signed
  ones zigzag-encoded):
  stream 0, the index:
    u8 length, the IANA version ("2026f")
    varint rule count, then per rule: svarint standard offset, u8 has DST;
        with DST: svarint DST offset, start date, svarint start time (seconds,
        local standard time), end date, svarint end time (local DST time); a
        date is u8 kind (0: Jn, 1: n, 2: Mm.w.d), then varint n, or u8 m, w, d
    varint zone count, then per zone: varint name count, names (u8 length,
        name), varint stream holding its record, varint record offset in it
  streams 1 to S-1, chunks of about 8 KB of zone records, each: varint rule
      index, varint offset count, offsets (UTC, east; varint of zigzag
      quarter hours x 2, or of zigzag seconds x 2 + 1), varint index of the
      offset at 1970, span from 1970 to the last transition (from then the rule
      applies; 0: from 1970), varint transition count, then per transition the
      span since the one before (the first: since 1970) and varint offset
      index; a span is varint hours x 4, minutes x 4 + 1 or seconds x 4 + 2
"""

import argparse
import json
import os
import random
import re
import struct
import sys
import zlib
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

EPOCH = 0
UNTIL = int(datetime(2100, 1, 1, tzinfo=timezone.utc).timestamp())
CHUNK = 8000
LAST = int(datetime(9999, 12, 30, tzinfo=timezone.utc).timestamp())


def read_tzif(data):
    """The 64-bit section of a TZif file: transitions, their UTC offsets, the
    first type's offset and the footer."""
    if data[:4] != b"TZif" or data[4] < ord("2"):
        raise ValueError("not a TZif file of version 2 or later")

    def counts(at):
        return struct.unpack(">6l", data[at + 20 : at + 44])

    isutc, isstd, leap, times, types, chars = counts(0)
    at = 44 + times * 5 + types * 6 + chars + leap * 8 + isstd + isutc
    isutc, isstd, leap, times, types, chars = counts(at)
    at += 44
    moments = struct.unpack(">%dq" % times, data[at : at + 8 * times])
    at += 8 * times
    which = data[at : at + times]
    at += times
    offsets = [struct.unpack(">l", data[at + 6 * i : at + 6 * i + 4])[0] for i in range(types)]
    at += 6 * types + chars + leap * 12 + isstd + isutc
    if data[at : at + 1] != b"\n":
        raise ValueError("no footer")
    footer = data[at + 1 : data.index(b"\n", at + 1)].decode()
    return list(moments), [offsets[i] for i in which], footer


def parse_offset(text):
    """[+-]hh[:mm[:ss]] at the start of text: seconds, and the rest."""
    m = re.match(r"([+-]?)(\d{1,3})(?::(\d{2}))?(?::(\d{2}))?", text)
    if not m:
        raise ValueError("bad offset in %r" % text)
    seconds = int(m[2]) * 3600 + int(m[3] or 0) * 60 + int(m[4] or 0)
    return (-seconds if m[1] == "-" else seconds), text[m.end() :]


def parse_name(text):
    m = re.match(r"<[^>]*>|[A-Za-z]{3,}", text)
    if not m:
        raise ValueError("bad zone name in %r" % text)
    return text[m.end() :]


def parse_date(text):
    m = re.match(r"J(\d+)|(\d+)|M(\d+)\.(\d)\.(\d)", text)
    if not m:
        raise ValueError("bad rule date in %r" % text)
    if m[1]:
        date = (0, int(m[1]))
    elif m[2]:
        date = (1, int(m[2]))
    else:
        date = (2, int(m[3]), int(m[4]), int(m[5]))
    rest = text[m.end() :]
    time = 7200
    if rest.startswith("/"):
        time, rest = parse_offset(rest[1:])
    return date, time, rest


def parse_rule(footer):
    """A POSIX TZ string as UTC offsets (east positive) and DST dates."""
    rest = parse_name(footer)
    std, rest = parse_offset(rest)
    std = -std
    if not rest:
        return (std, None)
    rest = parse_name(rest)
    dst = std + 3600
    if rest and rest[0] != ",":
        dst, rest = parse_offset(rest)
        dst = -dst
    if not rest.startswith(","):
        raise ValueError("DST without a rule in %r" % footer)
    start, start_time, rest = parse_date(rest[1:])
    if not rest.startswith(","):
        raise ValueError("no end date in %r" % footer)
    end, end_time, rest = parse_date(rest[1:])
    if rest:
        raise ValueError("trailing text in %r" % footer)
    return (std, (dst, start, start_time, end, end_time))


def varint(n):
    if n < 0:
        raise ValueError("negative varint")
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n):
    return n * 2 if n >= 0 else -n * 2 - 1


def svarint(n):
    return varint(zigzag(n))


def utc_offset(seconds):
    """A UTC offset, in quarter hours where it is a whole number of them."""
    if seconds % 900 == 0:
        return varint(zigzag(seconds // 900) * 2)
    return varint(zigzag(seconds) * 2 + 1)


def span(seconds):
    """A time between transitions, in the largest unit that divides it."""
    if seconds % 3600 == 0:
        return varint(seconds // 3600 * 4)
    if seconds % 60 == 0:
        return varint(seconds // 60 * 4 + 1)
    return varint(seconds * 4 + 2)


def encode_date(date):
    if date[0] == 2:
        return bytes([2, date[1], date[2], date[3]])
    return bytes([date[0]]) + varint(date[1])


def encode_rule(rule):
    std, dst = rule
    out = svarint(std)
    if dst is None:
        return out + b"\0"
    offset, start, start_time, end, end_time = dst
    return (
        out
        + b"\1"
        + svarint(offset)
        + encode_date(start)
        + svarint(start_time)
        + encode_date(end)
        + svarint(end_time)
    )


def offset_at(zone, unix_seconds):
    return int(datetime.fromtimestamp(unix_seconds, zone).utcoffset().total_seconds())


def zone_record(path, key, rules):
    moments, offsets, footer = read_tzif(open(path, "rb").read())
    rule = encode_rule(parse_rule(footer))
    rule_index = rules.setdefault(rule, len(rules))
    at_epoch = offset_at(ZoneInfo.from_file(open(path, "rb"), key=key), EPOCH)
    kept, current = [], at_epoch
    for moment, offset in zip(moments, offsets):
        if moment > EPOCH and offset != current:
            kept.append((moment, offset))
            current = offset
    rule_from = max(moments[-1] - EPOCH, 0) if moments else 0
    values = sorted({at_epoch, *(o for _, o in kept)})
    out = varint(rule_index) + varint(len(values))
    out += b"".join(utc_offset(v) for v in values)
    out += varint(values.index(at_epoch)) + span(rule_from) + varint(len(kept))
    before = EPOCH
    for moment, offset in kept:
        out += span(moment - before) + varint(values.index(offset))
        before = moment
    return out, moments


def cases(root, names, moments_of):
    """Offsets Python's zoneinfo reads from the same files."""
    rng = random.Random(17)
    out = []
    for name in names:
        zone = ZoneInfo.from_file(open(os.path.join(root, "zoneinfo", name), "rb"), key=name)
        moments = [m for m in moments_of[name] if EPOCH < m < UNTIL]
        points = {m + d for m in moments for d in (-1, 0, 1)}
        points |= {rng.randrange(-(10**10), 10**10) for _ in range(40)}
        points |= {rng.randrange(EPOCH, UNTIL) for _ in range(200)}
        points |= {rng.randrange(UNTIL, LAST) for _ in range(20)}
        for at in sorted(points):
            out.append([name, at, offset_at(zone, max(at, EPOCH))])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tzdata", help="the unpacked tzdata package (holds zones and zoneinfo/)")
    parser.add_argument("--cases", help="also write zoneinfo's offsets to this JSON file")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "src", "cel", "libraries", "time_zones.bin"))
    args = parser.parse_args()
    init = open(os.path.join(args.tzdata, "__init__.py")).read()
    version = re.search(r'IANA_VERSION = "([^"]+)"', init)[1]
    names = sorted(line.strip() for line in open(os.path.join(args.tzdata, "zones")) if line.strip())
    rules, zones, zone_of, moments_of = {}, {}, {}, {}
    for name in names:
        record, moments_of[name] = zone_record(os.path.join(args.tzdata, "zoneinfo", name), name, rules)
        zone_of[name] = zones.setdefault(record, len(zones))
    index = bytes([len(version)]) + version.encode()
    index += varint(len(rules)) + b"".join(rules)
    index += varint(len(zones))
    chunks = [b""]
    for record, number in zones.items():
        if len(chunks[-1]) >= CHUNK:
            chunks.append(b"")
        named = [name for name in names if zone_of[name] == number]
        index += varint(len(named)) + b"".join(bytes([len(n)]) + n.encode() for n in named)
        index += varint(len(chunks)) + varint(len(chunks[-1]))
        chunks[-1] += record
    # Raw deflate: no zlib header, no checksum.
    streams = [zlib.compress(part, 9)[2:-4] for part in [index, *chunks]]
    packed = varint(len(streams)) + b"".join(varint(len(x)) for x in streams) + b"".join(streams)
    open(args.out, "wb").write(packed)
    print(
        "%s: %d names, %d zones, %d rules; index %d bytes, records %d in %d chunks; %d bytes deflated"
        % (version, len(names), len(zones), len(rules), len(index), sum(map(len, chunks)), len(chunks), len(packed)),
        file=sys.stderr,
    )
    if args.cases:
        with open(args.cases, "w") as f:
            json.dump(cases(args.tzdata, names, moments_of), f)


if __name__ == "__main__":
    main()
