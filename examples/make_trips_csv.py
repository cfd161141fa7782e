#!/usr/bin/env python3
"""Writes examples/trips.csv: a small taxi-trips sample (report 003's shape,
8 columns) with a few empty fields, quoted fields and NA markers.

    python3 examples/make_trips_csv.py > examples/trips.csv
"""
import random
import sys

PLACES = ["Central Station", "Airport, Terminal 2", "Harbour", "Old Town",
          "University", "Stadium", "Market Square", "Riverside"]


def main(rows=2500, seed=3):
    rnd = random.Random(seed)
    out = sys.stdout
    out.write("trip_id,vendor,pickup_at,pickup_place,dropoff_place,passengers,distance_km,fare\n")
    for i in range(1, rows + 1):
        a, b = rnd.sample(PLACES, 2)
        q = lambda s: f'"{s}"' if "," in s else s
        passengers = "NA" if rnd.random() < 0.03 else str(rnd.randint(1, 6))
        fare = "" if rnd.random() < 0.02 else f"{rnd.uniform(3, 90):.2f}"
        out.write(f"{i},{rnd.choice(['CMT', 'VTS', 'DDS'])},"
                  f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T"
                  f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00,"
                  f"{q(a)},{q(b)},{passengers},{rnd.uniform(0.3, 35):.1f},{fare}\n")


if __name__ == "__main__":
    main()
