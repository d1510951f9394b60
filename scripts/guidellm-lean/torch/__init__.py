"""tokentap's stand-in for PyTorch in the lean guidellm venv (scripts/guidellm). This is NOT PyTorch.

guidellm 0.8.1 imports `torch.utils.data` at start-up (guidellm/data/loaders/torch.py), only to
iterate its datasets through a torch DataLoader: an IterableDataset, batch_size=1, no shuffle, a
collate function that returns the one item, one worker process prefetching up to 4096 items. The
torch wheel on PyPI is a CUDA build whose NVIDIA libraries (about 6 GB with them) are needed even to
import it. This stub implements that DataLoader as torch does it (utils/data/dataloader.py: the same
worker process, bounded prefetch queue and worker info, so the same items in the same order) and
nothing else: any other attribute is missing, so code that needs real torch (audio) fails loudly.
It has no package metadata, so transformers does not take it for torch; datasets only checks that a
`torch` module exists, so the venv's tokentap-torch-stub.pth sets USE_TORCH=0 for it.
"""

from . import utils  # noqa: F401


class Generator:
    """Seed holder: guidellm seeds one for the DataLoader, which only uses it to shuffle."""

    def __init__(self, device=None):
        self._seed = 0

    def manual_seed(self, seed):
        self._seed = int(seed)
        return self

    def initial_seed(self):
        return self._seed


class Tensor:
    """Never instantiated: `isinstance(x, torch.Tensor)` checks are simply False."""


def __getattr__(name):
    raise AttributeError(
        f"torch.{name}: this venv has tokentap's torch stub (scripts/guidellm), not PyTorch"
    )
