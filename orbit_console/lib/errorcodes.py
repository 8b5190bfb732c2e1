"""A task's last error code: what the console groups tasks by when it counts what sends them to
review and when it looks for precedent (docs/insight.md).

The recovery API has no error codes: an attempt ends with a free text ``error`` (docs/api.md).
Workers commonly write a code or a short cause first and the detail after a colon ("SMTP 451:
try again later", "broker outage: channel closed before the ack"), so the code of an error is
its first line up to the first colon, with its runs of whitespace made one space, cut at
``MAX_CHARS`` characters. An error without a colon is its own code ("connection reset"). The
text is kept as the worker wrote it otherwise (case, digits): two workers that spell one cause
two ways are two codes, which the insight page shows as such.
"""

MAX_CHARS = 64


def error_code(error: str | None) -> str:
    """The code of an attempt's ``error`` text; "" when there is none."""
    if not error:
        return ""
    lines = error.strip().splitlines()
    first_line = lines[0] if lines else ""
    cause = first_line.split(":", 1)[0]
    # A text that starts with its colon has no code before it: the line is the code.
    return " ".join((cause if cause.strip() else first_line).split())[:MAX_CHARS].rstrip()
