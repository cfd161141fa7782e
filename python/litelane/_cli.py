"""The ``litelane`` command, installed with the package as a console script
(the same Rust code as the ``litelane`` binary the workspace builds)::

    litelane import data.csv --db app.db
    python -m litelane._cli import data.csv --db app.db
"""

from __future__ import annotations

import sys
from typing import List, Optional

from . import _litelane


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the command with ``argv`` (default: this process's arguments)
    and exits with its status."""
    args = list(sys.argv if argv is None else argv)
    args[0] = "litelane"
    sys.exit(_litelane.cli_main(args))


if __name__ == "__main__":
    main()
