"""``python -m tpusim`` and the ``tpusim`` command: the command line, with a Ctrl-C that
arrives while the (heavy) modules are still importing also ending in one line."""

import sys


def run() -> int:
    """Import the command line and run it; returns the exit code."""
    try:
        from tpusim.cli.app import main
    except KeyboardInterrupt:
        print("tpusim: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as tpusim.cli.console.INTERRUPTED_EXIT_CODE
    return main()


if __name__ == "__main__":
    sys.exit(run())
