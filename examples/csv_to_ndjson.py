#!/usr/bin/env python3
"""Converts a CSV with a header (such as `make_wide_csv.py`'s) to NDJSON with
the same typed values, for import benchmarks: one object per record, keys
from the header in order; a field that reads as an integer or a finite real
becomes a JSON number written as in the CSV, an empty field becomes `null`
(or, with --absent, the key is left out), anything else a JSON string.

    python3 examples/make_wide_csv.py --rows 337000 > /tmp/wide.csv
    python3 examples/csv_to_ndjson.py /tmp/wide.csv > /tmp/wide.ndjson
"""
import argparse
import csv
import json
import math
import re
import sys

# JSON's number grammar: the CSV text is kept as written when it matches.
NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?\Z")


def value(field):
    if NUMBER.match(field) and math.isfinite(float(field)):
        return field
    return json.dumps(field, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--absent", action="store_true",
                    help="leave out the keys of empty fields instead of writing null")
    a = ap.parse_args()
    out = sys.stdout
    with open(a.csv, newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        keys = [json.dumps(k, ensure_ascii=False) for k in next(rows)]
        for rec in rows:
            parts = []
            for k, field in zip(keys, rec):
                if field == "":
                    if a.absent:
                        continue
                    parts.append(f"{k}:null")
                else:
                    parts.append(f"{k}:{value(field)}")
            out.write("{" + ",".join(parts) + "}\n")


if __name__ == "__main__":
    main()
