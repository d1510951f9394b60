"""`vllm bench serve` (vllm/benchmarks/serve.py, as shipped in the vllm wheel) without torch.

Same arguments and output files as `vllm bench serve`. Two differences from the real entry point
(vllm.entrypoints.cli.main), both only in how the code is reached: vllm/__init__.py is skipped (it
imports torch through vllm.env_override), and torch_stub stands in for torch (see its docstring).
The CLI's platform detection and `cli_env_setup()` are not run either; neither matters to a client
that only talks HTTP."""
import importlib.util
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_stub  # noqa: E402

torch_stub.install()

spec = importlib.util.find_spec("vllm")
pkg = types.ModuleType("vllm")
pkg.__path__ = list(spec.submodule_search_locations)
pkg.__file__ = spec.origin
sys.modules["vllm"] = pkg

from vllm.benchmarks.serve import add_cli_args, main  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

parser = FlexibleArgumentParser(prog="vllm bench serve", description="Benchmark the online serving throughput.")
add_cli_args(parser)
main(parser.parse_args())
