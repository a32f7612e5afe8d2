"""Packs records into the contract's flat form: one byte buffer and a few lists, so a
batch's records cross into the host in one call instead of one allocation per field."""

from typing import Dict, List, Sequence, Tuple

from ._model import Bytes, Record


def as_bytes(value: Bytes) -> bytes:
    """UTF-8 for strings, bytes as they are."""
    return value.encode() if isinstance(value, str) else bytes(value)


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
        """Appends one record made from batch row `row`."""
        for part, lengths in ((record.key, self.key_lengths), (record.value, self.value_lengths)):
            if part is None:
                lengths.append(-1)
            else:
                encoded = as_bytes(part)
                self.data += encoded
                lengths.append(len(encoded))
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
        headers: Sequence[Tuple[str, Bytes]] = record.headers
        if isinstance(headers, dict):
            headers = list(headers.items())
        self.header_counts.append(len(headers))
        for name, value in headers:
            self.any_header = True
            encoded = as_bytes(value)
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
