"""pytest plugin that runs xgrammar's own test files against the structgen package.

Loaded with `-p conftest` by scripts/xgrammar-tests.sh (the test files stay unchanged, outside
the repository). It
- makes `import xgrammar` and `import xgrammar.<sub>` load `structgen` and `structgen.<sub>`;
- provides what xgrammar's own conftest gives its tests (`_hf_token_available`,
  `_hf_token_explicitly_disabled`, the `num_parallel_threads` fixture, the markers);
- deselects the tests listed in deselect.txt (each with its reason), and the tests whose own
  parametrization asks for a device this machine lacks (a `device` or `impl` of "cuda",
  "triton" or "torch_compile" without a CUDA device, "metal" without MLX), decided before the
  test runs and never from the text of a failure;
- gives `xgrammar.testing` the names of xgrammar's internal passes and helpers
  (`GrammarFunctor`, `_generate_range_regex`, `_generate_float_regex`) so that the files that
  import them load; using one raises `XgrammarInternal`, and a test that fails with it is
  reported as deselected ("INTERNAL: uses xgrammar's internal ...", recognised by type);
- replaces the module helpers listed in deselect.txt as `file.py::helper=name` (helpers that only
  compare xgrammar's printed EBNF text) by ones that compare nothing, so that the behavioural
  checks of the tests that call them run; each call is counted and reported per file
  (`printed_skipped`);
- reports a test that fails because it reached for the Hugging Face hub (a huggingface_hub
  offline or missing-file error in its exception chain, recognised by type) as deselected
  ("needs the hub") instead of failed, so that other xgrammar test files run here too;
- writes one JSON line per file (passed / failed / deselected with reasons) to
  $XGRAMMAR_TESTS_REPORT when set.
"""

import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`xgrammar[.x]` is `structgen[.x]`: the same module objects under a second name."""

    def find_spec(self, name, path=None, target=None):
        if name == "xgrammar" or name.startswith("xgrammar."):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return importlib.import_module("structgen" + spec.name[len("xgrammar"):])

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())


class XgrammarInternal(NotImplementedError):
    """A test reached for a part of xgrammar's implementation that structgen does not have."""


class _Internal:
    """Stands for an xgrammar-internal name: any use raises `XgrammarInternal`."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        raise XgrammarInternal(f"{self._name}.{attr} is xgrammar-internal")

    def __call__(self, *args, **kwargs):
        raise XgrammarInternal(f"{self._name} is xgrammar-internal")


def _add_internal_names():
    testing = importlib.import_module("structgen.testing")
    for name in ("GrammarFunctor", "_generate_range_regex", "_generate_float_regex"):
        if not hasattr(testing, name):
            setattr(testing, name, _Internal(name))


_add_internal_names()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _hf_token_available() -> bool:
    """No hub here: tests that need it are deselected."""
    return False


def _hf_token_explicitly_disabled(config) -> bool:
    return True


@pytest.fixture
def num_parallel_threads() -> int:
    return 1


def pytest_configure(config):
    for marker in ("thread_unsafe", "hf_token_required", "nightly"):
        config.addinivalue_line("markers", f"{marker}: marker used by xgrammar's tests")


def _load_deselections():
    path = Path(__file__).with_name("deselect.txt")
    out, helpers = {}, {}
    for line in path.read_text(encoding="utf-8").splitlines():
        entry, _, reason = line.partition("#")
        entry = entry.strip()
        if "::helper=" in entry:
            file, _, name = entry.partition("::helper=")
            helpers.setdefault(file, []).append(name)
        elif entry:
            out[entry] = reason.strip()
    return out, helpers


_DESELECT, _HELPERS = _load_deselections()
_REPORT = defaultdict(
    lambda: {"passed": 0, "failed": 0, "deselected": 0, "reasons": {}, "failures": [], "printed_skipped": 0}
)


def _neutralize_helpers(items):
    """Replaces the listed printed-text helpers in the modules of `items` (once per module)."""
    done = set()
    for item in items:
        module = getattr(item, "module", None)
        if module is None or id(module) in done:
            continue
        done.add(id(module))
        file = Path(module.__file__).name
        for name in _HELPERS.get(file, []):
            if hasattr(module, name):
                def skipped(*args, _file=file, **kwargs):
                    _REPORT[_file]["printed_skipped"] += 1

                setattr(module, name, skipped)


def _short(nodeid: str) -> str:
    """`file.py::test[params]` without the file's directory (params may hold slashes)."""
    path, sep, rest = nodeid.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def _listed(nodeid: str):
    name = _short(nodeid)
    for entry, reason in _DESELECT.items():
        if name == entry or name.startswith(entry + "["):
            return reason
    return None


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def _deselect(nodeid: str, reason: str) -> None:
    r = _REPORT[_file_of(nodeid)]
    r["deselected"] += 1
    key = reason.split(":", 1)[0]
    r["reasons"][key] = r["reasons"].get(key, 0) + 1


# Parameter values by which a test asks for a device, and whether this machine has it.
_CUDA_KERNELS = ("cuda", "triton", "torch_compile")


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _has_mlx() -> bool:
    return importlib.util.find_spec("mlx") is not None


def _device_reason(item):
    """Why `item` cannot run here, from its own parametrization (`device` / `impl`), or None."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    asked = [str(params[k]) for k in ("device", "impl") if k in params]
    if any(a in _CUDA_KERNELS for a in asked) and not _has_cuda():
        return f"CUDA: asks for a CUDA device ({', '.join(asked)}) and this machine has none"
    if "metal" in asked and not _has_mlx():
        return "METAL: asks for MLX/Metal and this machine has no mlx"
    return None


def pytest_collection_modifyitems(config, items):
    _neutralize_helpers(items)
    kept, dropped = [], []
    for item in items:
        reason = _listed(item.nodeid) or _device_reason(item)
        if reason is None:
            kept.append(item)
        else:
            dropped.append(item)
            _deselect(item.nodeid, reason)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# huggingface_hub's errors for a file that offline mode or a missing cache keeps from the test.
_HUB_ERRORS = ("OfflineModeIsEnabled", "LocalEntryNotFoundError", "GatedRepoError")


def _hub_reason(excinfo):
    """'needs the hub' when a huggingface_hub offline or missing-file error is in the chain of
    the exception the test raised (transformers wraps it in an OSError)."""
    if excinfo is None:
        return None
    seen, e = set(), excinfo.value
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        kind = type(e)
        if kind.__module__.startswith("huggingface_hub") and kind.__name__ in _HUB_ERRORS:
            return "HUB: needs the Hugging Face hub (a huggingface_hub error at run time)"
        e = e.__cause__ or e.__context__
    return None


def _internal_reason(excinfo):
    if excinfo is not None and isinstance(excinfo.value, XgrammarInternal):
        return f"INTERNAL: uses xgrammar's internal {excinfo.value}"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        reason = _hub_reason(call.excinfo) or _internal_reason(call.excinfo)
        if reason is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"deselected: {reason}")
            report.structgen_deselected = reason


def pytest_runtest_logreport(report):
    name = _file_of(report.nodeid)
    reason = getattr(report, "structgen_deselected", None)
    if reason is not None:
        if report.when == "call" or report.when == "setup":
            _deselect(report.nodeid, reason)
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        r = _REPORT[name]
        if report.passed:
            r["passed"] += 1
        elif report.skipped:
            _deselect(report.nodeid, "SKIP: skipped by the test itself (" + _skip_text(report) + ")")
        else:
            r["failed"] += 1
            r["failures"].append(report.nodeid)


def _skip_text(report) -> str:
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2])
    return str(lr)[:80]


def pytest_collectreport(report):
    if report.failed:
        r = _REPORT[_file_of(report.nodeid) or "?"]
        r["failed"] += 1
        r["failures"].append(f"{report.nodeid} (collection error)")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("XGRAMMAR_TESTS_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for name, r in sorted(_REPORT.items()):
            f.write(json.dumps({"file": name, **r}) + "\n")
