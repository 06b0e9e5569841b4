"""Parquet copies written in row groups from records as they come (vsr_dataset.hub)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from vsr_dataset.hub import write_parquet

FEATURES: list[Any] = [
    {"name": "caption", "dtype": "string"},
    {"name": "label", "dtype": "int64"},
    {"name": "votes", "list": [{"name": "validator_id", "dtype": "int64"}]},
]


def rows(n: int, given: list[int]) -> Iterator[dict[str, Any]]:
    for i in range(n):
        given.append(i)
        yield {
            "caption": f"The cat {i} is on the bed.",
            "label": i % 2,
            "votes": [{"validator_id": i}],
        }


def test_records_go_in_row_groups_from_a_single_pass(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    given: list[int] = []
    write_parquet(rows(2_345, given), FEATURES, path, rows_per_group=1_000)
    assert given == list(range(2_345))  # one pass over a generator, as the export streams
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == 3
    assert [f.metadata.row_group(i).num_rows for i in range(3)] == [1_000, 1_000, 345]
    assert f.read().to_pylist() == list(rows(2_345, []))


def test_no_records_still_give_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    write_parquet(iter(()), FEATURES, path)
    table = pq.read_table(path)
    assert table.num_rows == 0 and table.schema.names == ["caption", "label", "votes"]
