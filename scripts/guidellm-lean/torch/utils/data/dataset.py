from collections.abc import Iterable
from typing import Generic, TypeVar

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    def __getitem__(self, index):
        raise NotImplementedError


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    def __iter__(self):
        raise NotImplementedError
