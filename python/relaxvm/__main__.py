"""``python -m relaxvm`` and the ``relaxvm`` console script: the command-line tool (``relaxvm
--help``), the same as the native binary ``cargo install --path cli`` builds."""

import logging
import os
import signal
import sys

from ._relaxvm import _cli_main

_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


def main() -> int:
    """Runs the tool on ``sys.argv`` and returns its exit status."""
    # As the native tool does: Ctrl-C ends the process. Python's own handler would only set a
    # flag that the running command never looks at.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # As the native tool does: diagnostics to stderr at the level RELAXVM_LOG names.
    level = os.environ.get("RELAXVM_LOG", "warn").strip().lower()
    logging.basicConfig(
        level=_LEVELS.get(level, logging.NOTSET if level == "trace" else logging.WARNING),
        format="[%(levelname)s %(name)s] %(message)s",
    )
    return _cli_main(["relaxvm", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
