"""Packs records into the contract's flat form: one byte buffer and a few lists, so a
batch's records cross into the host in one call instead of one allocation per field."""

from typing import Dict, List, Sequence, Tuple

from ._model import Bytes, Record


def as_bytes(value: Bytes) -> bytes:
    """UTF-8 for strings, bytes-like values as they are; anything else is a TypeError
    (an int would otherwise become that many zero bytes)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"A key, value or header must be str or bytes, not {type(value).__name__}.")


class Packer:
    """Collects records in emit order and hands them out as packed lists."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        """Forgets every record."""
        self.data = bytearray()
        self.source_rows: List[int] = []
        self.key_lengths: List[int] = []
        self.value_lengths: List[int] = []
        self.topics: Dict[str, int] = {}
        self.topic_indexes: List[int] = []
        self.partitions: List[int] = []
        self.header_names: Dict[str, int] = {}
        self.header_counts: List[int] = []
        self.header_name_indexes: List[int] = []
        self.header_value_lengths: List[int] = []
        self.any_topic = self.any_partition = self.any_header = False

    def __len__(self) -> int:
        return len(self.source_rows)

    def add(self, row: int, record: Record) -> None:
        """Appends one record made from batch row `row`. Every part is converted
        before anything is appended, so a bad record leaves the lists as they were."""
        key = None if record.key is None else as_bytes(record.key)
        value = None if record.value is None else as_bytes(record.value)
        headers: Sequence[Tuple[str, Bytes]] = record.headers
        if isinstance(headers, dict):
            headers = list(headers.items())
        headers = [(name, as_bytes(header)) for name, header in headers]
        for part, lengths in ((key, self.key_lengths), (value, self.value_lengths)):
            if part is None:
                lengths.append(-1)
            else:
                self.data += part
                lengths.append(len(part))
        self.source_rows.append(row)
        if record.topic is None:
            self.topic_indexes.append(0)
        else:
            self.any_topic = True
            self.topic_indexes.append(self.topics.setdefault(record.topic, len(self.topics)) + 1)
        if record.partition is None:
            self.partitions.append(-1)
        else:
            self.any_partition = True
            self.partitions.append(record.partition)
        self.header_counts.append(len(headers))
        for name, encoded in headers:
            self.any_header = True
            self.data += encoded
            self.header_name_indexes.append(self.header_names.setdefault(name, len(self.header_names)))
            self.header_value_lengths.append(len(encoded))

    def lists(self) -> dict:
        """The contract's `packed-records` fields; optional lists left empty when every
        record takes the default."""
        return dict(
            data=bytes(self.data),
            source_rows=self.source_rows,
            key_lengths=self.key_lengths,
            value_lengths=self.value_lengths,
            topics=list(self.topics),
            topic_indexes=self.topic_indexes if self.any_topic else [],
            partitions=self.partitions if self.any_partition else [],
            header_names=list(self.header_names),
            header_counts=self.header_counts if self.any_header else [],
            header_name_indexes=self.header_name_indexes,
            header_value_lengths=self.header_value_lengths,
        )
