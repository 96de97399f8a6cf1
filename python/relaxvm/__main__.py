"""``python -m relaxvm`` and the ``relaxvm`` console script: the command-line tool (``relaxvm
--help``), the same as the native binary ``cargo install --path builder`` builds."""

import signal
import sys

from ._relaxvm import _cli_main


def main() -> int:
    """Runs the tool on ``sys.argv`` and returns its exit status."""
    # As the native tool does: Ctrl-C ends the process. Python's own handler would only set a
    # flag that the running command never looks at.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _cli_main(["relaxvm", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
