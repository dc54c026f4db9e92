"""A server process a test starts, with its output in a log file: what our broker and Tansu
(``support.brokers.BrokerProcess``) and an Apache Kafka node (``support.apache_kafka.KafkaNode``) share.

Every start appends ``=== start N: <command>`` and then the process's stdout and stderr to the log; it runs in
its own session, so a terminal's ^C does not reach it (the test signals it). ``stop`` sends SIGTERM, then
SIGKILL after ``stop_timeout``; ``kill9`` sends SIGKILL. Only the process this object started is ever
signalled. How a subclass knows that its server is ready is its own business (``support.waiting``).
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


class LoggedProcess:
    def __init__(self, log_path: Path, *, stop_timeout: float) -> None:
        self.log_path = log_path
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def spawn(
        self,
        cmd: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        """Start ``cmd`` without waiting for anything."""
        if self.running:
            raise RuntimeError(f"{self!r} already running")
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"=== start {self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,  # a terminal's ^C does not reach it; we signal it ourselves
                preexec_fn=preexec_fn,
            )

    def run_to_end(self, what: str, cmd: Sequence[str], timeout: float) -> int:
        """Run a one-off command (a set-up step) to its end with its output in the log; its exit code."""
        with open(self.log_path, "ab") as log:
            log.write(f"=== {what}: {' '.join(cmd)}\n".encode())
            log.flush()
            done = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=timeout,
            )
        return done.returncode

    def exit_code(self) -> int | None:
        """The code of the process this object started when it has exited by itself (it is forgotten then);
        None while it runs, or when there is none."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return None
        self._proc = None
        return proc.returncode

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; returns the exit code (None when not running)."""
        proc = self._proc
        if proc is None:
            return None
        self._proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                self.note(f"SIGKILL after SIGTERM was ignored for {self.stop_timeout}s")
        return proc.wait(timeout=self.stop_timeout)

    def kill9(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=self.stop_timeout)
        self.note("killed with SIGKILL by the test")

    # -- the log ---------------------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"=== {text}\n".encode())

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()[-lines:]
        return f"--- last {len(text)} lines of {self.log_path} ---\n" + "\n".join(text)
