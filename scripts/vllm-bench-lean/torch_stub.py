"""A permissive stand-in for `torch` (and triton, torchvision, torchaudio, xgrammar), for running vLLM's
own benchmark client (`vllm bench serve`, vllm/benchmarks/serve.py) from the vllm wheel without the
multi-GB CUDA torch wheel.

The benchmark client is plain asyncio + aiohttp + numpy + a Hugging Face tokenizer, but the modules it
imports (vllm.tokenizers, vllm.benchmarks.datasets -> vllm.inputs, vllm.lora, vllm.multimodal, ...) pull
in the engine, which imports torch at module level: dtype tables, `nn.Module` subclasses, custom-op
registrations, decorators. None of it runs on the HTTP client path. This module answers every
`import torch...` with modules whose attributes are inert placeholder classes (callable, usable as
decorators, bases, type hints, in `|` unions, int()/float() as 0, falsy), gives torch the dtypes'
`itemsize`, a `__version__` and a distribution version for importlib.metadata, and none of the
accelerator namespaces whose mere presence vLLM/SGLang take as "this device exists".

install() must run after prewarm_transformers(): transformers caches `is_torch_available()` and
friends, so asking it first, while torch is truly absent, keeps it in tokenizer-only mode.
Anything that really computes with torch fails (it gets placeholders, not tensors)."""
import abc
import importlib.abc
import importlib.machinery
import importlib.metadata as _md
import sys
import types

TORCH_VERSION = "2.14.0"
STUBBED = {"torch", "triton", "torchvision", "torchaudio", "xgrammar"}
ABSENT = {"npu", "musa", "mlu"}  # hasattr(torch, "npu") means an Ascend build
_DTYPES = {
    "float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "float": 4, "float64": 8, "double": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2, "int32": 4, "int": 4,
    "int64": 8, "long": 8, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
}


def _dunder(name):
    return name.startswith("__") and name.endswith("__")


class _Inert:
    """Operators shared by placeholder classes (through the metaclass) and placeholder instances."""

    def __bool__(self): return False
    def __iter__(self): return iter(())
    def __int__(self): return 0
    def __index__(self): return 0
    def __float__(self): return 0.0
    def __len__(self): return 0
    def __add__(self, o): return self
    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__
    def __neg__(self): return self
    def __lt__(self, o): return False
    __le__ = __gt__ = __ge__ = __lt__


class _Meta(_Inert, abc.ABCMeta):
    """Metaclass of the placeholder classes (an ABCMeta, so they mix with ABC bases)."""

    def __getattr__(cls, name):
        if _dunder(name):
            raise AttributeError(name)
        return _cls(f"{cls.__name__}.{name}")

    def __call__(cls, *a, **k):
        if len(a) == 1 and not k and callable(a[0]) and not isinstance(a[0], _Meta):
            return a[0]  # used as a decorator
        return _Inst()

    def __or__(cls, o): return cls
    def __ror__(cls, o): return cls
    def __getitem__(cls, k): return cls
    def __hash__(cls): return id(cls)
    def __eq__(cls, o): return cls is o


class _Base(metaclass=_Meta):
    pass


def _cls(name, **attrs):
    return _Meta(name, (_Base,), attrs)


class _Inst(_Inert, str):
    """A placeholder value. A str (the empty one) so that getattr(x, it) and os.path.join work."""

    def __getattr__(self, name):
        if _dunder(name):
            raise AttributeError(name)
        return _Inst()

    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]
        return _Inst()

    def __enter__(self): return self
    def __exit__(self, *a): return False
    __hash__ = str.__hash__
    __eq__ = str.__eq__


class _Mod(types.ModuleType):
    def __getattr__(self, name):
        if _dunder(name) or name in ABSENT:
            raise AttributeError(name)
        v = _cls(f"{self.__name__}.{name}")
        setattr(self, name, v)
        return v


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Mod(spec.name)
        m.__path__ = []
        if spec.name == "torch":
            m.__version__ = TORCH_VERSION
            for n, size in _DTYPES.items():
                setattr(m, n, _cls(f"torch.{n}", itemsize=size))
        if spec.name == "torch.version":
            m.__version__ = TORCH_VERSION
            m.cuda = m.hip = None
            m.git_version = ""
        return m

    def exec_module(self, module):
        pass


class _FakeDist(_md.Distribution):
    def __init__(self, name, version):
        self._name, self._version = name, version

    def read_text(self, filename):
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: {self._name}\nVersion: {self._version}\n"
        return None

    def locate_file(self, path):
        return path


class _DistFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, *a, **k):
        return None

    def find_distributions(self, context=_md.DistributionFinder.Context()):
        if context.name == "torch":
            yield _FakeDist("torch", TORCH_VERSION)


def prewarm_transformers():
    import transformers.utils.import_utils as iu

    for n in dir(iu):
        if n.startswith("is_torch") or n in ("is_triton_available",):
            f = getattr(iu, n)
            if callable(f) and hasattr(f, "cache_clear"):
                try:
                    f()
                except Exception:
                    pass


def install():
    prewarm_transformers()
    sys.meta_path.insert(0, _Finder())
    sys.meta_path.append(_DistFinder())
