"""CSV that a spreadsheet opens as data: every CSV export of the console writes through here.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is run as a
formula by spreadsheets (CSV injection: ``=HYPERLINK(...)`` in a business key, a reason or a
note would be a link, or worse, in the reader's spreadsheet). Such a cell is written with a
leading apostrophe, which spreadsheets show as text, as OWASP's guidance on CSV injection
advises; quoting and escaping are the ``csv`` module's.
"""

import csv
import io
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """``value`` as a spreadsheet must show it: text that would run as a formula, prefixed."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def lines(rows: Iterable[Iterable[Any]]) -> str:
    """The CSV text of ``rows`` (a header is a row like any other), every cell neutralised."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows([cell(value) for value in row] for row in rows)
    return buffer.getvalue()
