"""Small helpers for the sentences tfrecorder writes (messages, warnings, pages)."""


def count(number: int, singular: str, plural: str | None = None) -> str:
    """'1 image', '3 images', '1,200 classes' (give `plural` where "s" is wrong)."""
    return f"{number:,} {singular if number == 1 else plural or singular + 's'}"
