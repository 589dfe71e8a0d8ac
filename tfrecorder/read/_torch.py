"""PyTorch's face of `reader.SplitDataset`, imported only by `SplitDataset.to_torch`: it
imports torch at import, which tfrecorder never needs otherwise.

A module of its own, not a class made inside `to_torch`, so that pickle finds it by name
when DataLoader's workers are spawned rather than forked.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.utils.data


class TorchDataset(torch.utils.data.Dataset):
    """A map-style PyTorch dataset of a split's records (`open_split`): DataLoader reads
    it with any sampler and any `num_workers`, each worker opening the shards itself.

    Records are the split's dicts (NumPy arrays, which DataLoader's default collate turns
    into tensors), or what the dataset's `transform` made of them.
    """

    def __init__(self, records: Sequence):  # a SplitDataset (imported by it: no circle)
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int):
        return self.records[index]

    def __repr__(self) -> str:
        return f"TorchDataset({self.records!r})"
