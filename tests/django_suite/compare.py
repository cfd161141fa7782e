"""Compares two outcome files of Django's test suite (stock sqlite3 vs
litelane.django) written by outcomes.py: counts per side and every test whose
outcome differs. Exit status 0 when no test passes on stock and fails or errors
on litelane (unless --allow lists it), 1 otherwise.

    python compare.py STOCK.json LITELANE.json [--allow FILE] [--json OUT]
"""

import argparse
import json
import sys

BAD = ("fail", "error")


def counts(outcomes):
    c = {"run": len(outcomes)}
    for k in ("pass", "fail", "error", "skip", "xfail", "xpass"):
        c[k] = sum(1 for v in outcomes.values() if v == k)
    return c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stock")
    ap.add_argument("litelane")
    ap.add_argument("--allow", help="a file of test ids (one a line, '#' comments) known to differ")
    ap.add_argument("--json", help="write the comparison here")
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    with open(args.stock) as f:
        stock = json.load(f)
    with open(args.litelane) as f:
        lite = json.load(f)
    allowed = set()
    if args.allow:
        with open(args.allow) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    allowed.add(line)
    cs, cl = counts(stock), counts(lite)
    print(f"Django test suite {args.label}".rstrip())
    print(f"{'':10}{'run':>7}{'pass':>7}{'fail':>7}{'error':>7}{'skip':>7}{'xfail':>7}{'xpass':>7}")
    for name, c in (("sqlite3", cs), ("litelane", cl)):
        print(f"{name:10}" + "".join(f"{c[k]:>7}" for k in ("run", "pass", "fail", "error", "skip", "xfail", "xpass")))
    differ = sorted(t for t in set(stock) | set(lite) if stock.get(t) != lite.get(t))
    worse = [t for t in differ if lite.get(t) in BAD and stock.get(t) not in BAD]
    print(f"\n{len(differ)} tests differ ({len(worse)} pass on sqlite3 and fail or error on litelane):")
    for t in differ:
        mark = " (known)" if t in allowed else ""
        print(f"  {t}: sqlite3 {stock.get(t, 'absent')}, litelane {lite.get(t, 'absent')}{mark}")
    unexplained = [t for t in worse if t not in allowed]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "sqlite3": cs,
                    "litelane": cl,
                    "differ": {t: [stock.get(t), lite.get(t)] for t in differ},
                    "unexplained": unexplained,
                },
                f,
                indent=1,
            )
    if unexplained:
        print(f"\n{len(unexplained)} differences are not in the known list")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
