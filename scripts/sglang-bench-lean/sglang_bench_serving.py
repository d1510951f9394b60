"""`python -m sglang.bench_serving` (sglang/benchmark/serving.py, as shipped in the sglang wheel) without torch.

Same arguments and output file as `python -m sglang.bench_serving`. The benchmark client needs only
aiohttp, numpy, transformers, datasets...; it reaches into the server package for two things: the
constant FAKE_BOOTSTRAP_HOST (sglang.srt.disaggregation.utils, a module that imports torch and the model
configs) and resolve_base_url/resolve_host_port (sglang.srt.utils.network, light, but its package's
__init__ imports torch), and `import sglang` itself runs sglang/__init__.py, which imports torch. So:
skip sglang/__init__.py and sglang/srt/utils/__init__.py, and give sglang.srt.disaggregation.utils a
module holding only that constant, read from the installed file with `ast`. Everything else is SGLang's
code, unchanged."""
import ast, importlib.util, os, sys, types

def _bare_package(name, path):
    m = types.ModuleType(name)
    m.__path__ = [path]
    m.__file__ = os.path.join(path, "__init__.py")
    sys.modules[name] = m
    return m

root = os.path.dirname(importlib.util.find_spec("sglang").origin)
_bare_package("sglang", root)
_bare_package("sglang.srt.utils", os.path.join(root, "srt", "utils"))

src = os.path.join(root, "srt", "disaggregation", "utils.py")
consts = {}
for node in ast.parse(open(src).read()).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FAKE_BOOTSTRAP_HOST" for t in node.targets):
        consts["FAKE_BOOTSTRAP_HOST"] = ast.literal_eval(node.value)
if "FAKE_BOOTSTRAP_HOST" not in consts:
    sys.exit(f"FAKE_BOOTSTRAP_HOST not found in {src}")
dis = types.ModuleType("sglang.srt.disaggregation.utils")
dis.__dict__.update(consts)
sys.modules["sglang.srt.disaggregation.utils"] = dis

from sglang.benchmark.serving import cli_main
sys.argv[0] = "python -m sglang.bench_serving"
cli_main()
