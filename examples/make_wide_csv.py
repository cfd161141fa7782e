#!/usr/bin/env python3
"""Writes a realistic wide CSV for import benchmarks: N rows x 20 columns
(integers, reals, text, timestamps, some empty fields = NULL, some quoted
fields with commas). Deterministic for a given --seed.

    python3 examples/make_wide_csv.py --rows 300000 > /tmp/wide.csv
"""
import argparse
import random
import sys

ZONES = ["Midtown", "Upper East Side", "JFK Airport", "Harlem, Central",
         "Chelsea", "SoHo", "Astoria", "Williamsburg", "Financial District"]
PAYMENTS = ["card", "cash", "no charge", "dispute"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    out = sys.stdout
    out.write("id,pickup_at,vendor_id,passengers,distance_km,pickup_lon,pickup_lat,"
              "dropoff_lon,dropoff_lat,rate_code,store_and_forward,payment,fare,extra,"
              "tax,tip,tolls,total,zone,note\n")
    for i in range(1, a.rows + 1):
        fare = round(rnd.uniform(2.5, 80), 2)
        extra = rnd.choice([0, 0.5, 1])
        tip = "" if rnd.random() < 0.3 else f"{round(fare * rnd.uniform(0, 0.3), 2)}"
        tolls = "" if rnd.random() < 0.8 else f"{round(rnd.uniform(1, 12), 2)}"
        zone = rnd.choice(ZONES)
        zone = f'"{zone}"' if "," in zone else zone
        note = "" if rnd.random() < 0.9 else f'"said ""thanks"", tipped {rnd.randint(1, 9)}"'
        total = fare + extra + 0.5 + (float(tip) if tip else 0) + (float(tolls) if tolls else 0)
        out.write(
            f"{i},2024-{rnd.randint(1,12):02d}-{rnd.randint(1,28):02d} "
            f"{rnd.randint(0,23):02d}:{rnd.randint(0,59):02d}:{rnd.randint(0,59):02d},"
            f"{rnd.randint(1,2)},{'' if rnd.random() < 0.05 else rnd.randint(1, 6)},"
            f"{round(rnd.uniform(0.1, 40), 3)},{round(rnd.uniform(-74.05, -73.75), 6)},"
            f"{round(rnd.uniform(40.6, 40.9), 6)},{round(rnd.uniform(-74.05, -73.75), 6)},"
            f"{round(rnd.uniform(40.6, 40.9), 6)},{rnd.randint(1, 6)},{rnd.choice('NY')},"
            f"{rnd.choice(PAYMENTS)},{fare},{extra},0.5,{tip},{tolls},{round(total, 2)},"
            f"{zone},{note}\n")


if __name__ == "__main__":
    main()
