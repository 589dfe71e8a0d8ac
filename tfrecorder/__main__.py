"""`python -m tfrecorder`, and the installed `tfrecorder` script: the command line."""

from tfrecorder._interrupt import quiet_interrupt


def main() -> int:
    """Runs `cli.main`; a Ctrl-C while it imports is one line too (see `_interrupt`)."""
    with quiet_interrupt(always=True):
        from tfrecorder.cli import main as run_command
    return run_command()


if __name__ == "__main__":
    raise SystemExit(main())
