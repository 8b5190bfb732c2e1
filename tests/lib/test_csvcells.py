"""CSV that spreadsheets open as data (OWASP, CSV injection): one helper for every export."""

import csv
import io
import re
from pathlib import Path

import pytest

from orbit_console.lib import csvcells

PACKAGE = Path(csvcells.__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "text",
    ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1:A2)", "\tTAB", "\rCR"],
)
def test_a_cell_that_would_run_as_a_formula_is_written_as_text(text: str) -> None:
    [row] = csv.reader(io.StringIO(csvcells.lines([[text, "ok"]]), newline=""))
    assert row == ["'" + text, "ok"]


@pytest.mark.parametrize("value", ["ok", "a=b", " =1", "", 7, None, "日本"])
def test_other_cells_are_written_as_they_are(value: object) -> None:
    assert csvcells.cell(value) == value


def test_every_csv_export_of_the_console_writes_through_the_one_helper() -> None:
    """No module but lib/csvcells.py writes CSV itself: a new export cannot skip the guard."""
    writers = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"^\s*(import csv|from csv import)", path.read_text(), re.MULTILINE)
    ]
    assert writers == ["lib/csvcells.py"]
