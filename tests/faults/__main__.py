"""``python -m tests.faults [--minutes 30 | --short] [--seed N] [--workdir DIR] [--keep]`` from the repo root.

Runs one fault schedule (see `tests.faults.runner`) and prints its summary: hours, faults injected by kind,
records checked, anomalies; on failure also the seed, the replay command, the schedule and the checker's
report, and the run directory is kept. Exit status 0 when the checker found nothing, 1 otherwise.

Mounting the broker's tmpfs needs root; anyone else is re-executed inside a user and mount namespace of their
own (``unshare --user --map-root-user --mount``) when ``unshare`` allows it.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
_IN_NAMESPACE = "GROUPSTREAM_FAULTS_USERNS"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__.split("\n\n")[0])
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, default=30.0, help="length of the nemesis' schedule (default 30)")
    length.add_argument("--short", action="store_true", help="the short schedule of make test")
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: random, printed)")
    parser.add_argument("--workdir", type=Path, default=None, help="run directory (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory after a passing run")
    args = parser.parse_args(argv)

    if os.geteuid() != 0 and not os.environ.get(_IN_NAMESPACE) and shutil.which("unshare"):
        env = dict(os.environ, **{_IN_NAMESPACE: "1"})
        cmd = ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-m", "tests.faults",
               *(argv if argv is not None else sys.argv[1:])]  # fmt: skip
        os.execvpe(cmd[0], cmd, env)

    sys.path.insert(0, str(TESTS_DIR))  # `support` and `faults`, as pytest finds them
    from faults.runner import long_config, run, short_config

    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    run_dir = args.workdir or Path(tempfile.mkdtemp(prefix=f"groupstream-faults-{seed}-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = short_config(seed, run_dir) if args.short else long_config(seed, run_dir, args.minutes)
    result = run(cfg)
    if not result.ok:
        print(result.failure_text())
        return 1
    if not args.keep and args.workdir is None:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
