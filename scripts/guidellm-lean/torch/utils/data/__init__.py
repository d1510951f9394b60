from .dataloader import DataLoader, get_worker_info
from .dataset import Dataset, IterableDataset

__all__ = ["DataLoader", "Dataset", "IterableDataset", "get_worker_info"]
