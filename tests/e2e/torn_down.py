"""Test fixtures that always clean up: a SIGINT or SIGTERM becomes an exception, so the
`with` block's exit runs and the fixture's teardown with it (a killed test run leaves no
Slurm daemons or throwaway users behind). Subclasses define _setup() and _teardown()."""
import signal


class TornDownOnSignal:
    def __enter__(self):
        self._old_handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._setup()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self._teardown()
        finally:
            for sig, old in self._old_handlers.items():
                signal.signal(sig, old)
            self._old_handlers = {}
        return False

    def _on_signal(self, signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
