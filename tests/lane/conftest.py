"""The lane and stock builds the tests load: LANE_SQLITE_DIR and
LANE_SQLITE_STOCK_DIR, or target/lane-sqlite/{lane,stock}, built with
scripts/build-lane-sqlite when missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _build(env: str, name: str, stock: bool) -> str:
    d = Path(os.environ.get(env) or ROOT / "target" / "lane-sqlite" / name)
    lib = d / "lib" / "libsqlite3.so.0"
    if not lib.exists():
        args = [str(ROOT / "scripts" / "build-lane-sqlite")] + (["--stock"] if stock else []) + [str(d)]
        subprocess.run(args, check=True)
    return str(lib)


@pytest.fixture(scope="session")
def lane_lib() -> str:
    return _build("LANE_SQLITE_DIR", "lane", stock=False)


@pytest.fixture(scope="session")
def stock_lib() -> str:
    return _build("LANE_SQLITE_STOCK_DIR", "stock", stock=True)
