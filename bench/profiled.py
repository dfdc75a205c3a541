"""Run pircd with cProfile switched on by SIGUSR1 and off by SIGUSR2.

    python -m bench.profiled OUT.prof serve --config pircd.toml

The runner sends SIGUSR1 when a scenario's measured phase starts and SIGUSR2
when it ends, so the profile holds the hot path and not start-up or set-up.
The statistics are written to OUT.prof when the server exits (SIGTERM).
"""

from __future__ import annotations

import cProfile
import signal
import sys


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    profile = cProfile.Profile()
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
    signal.signal(signal.SIGUSR2, lambda *_: profile.disable())
    from ircd.cli import main as cli

    try:
        cli.main(args=args, prog_name="pircd", standalone_mode=False)
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
