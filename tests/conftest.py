# pytest: the helpers of tests/support (torch_testing) are importable from every test folder.
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# Debug mode for every test (kernelkit.set_debug_checks): a CUDA op that met a bad index on the device raises at the
# call. Read by the library at its first op, so it is set before any test runs one.
os.environ.setdefault("KERNELKIT_CHECK", "1")

# Hypothesis (the property tests, tests/<family>/test_<family>_fuzz.py): reproducible runs by default (CI); set
# HYPOTHESIS_PROFILE=explore for fresh random cases and more of them.
try:
    from hypothesis import HealthCheck, settings

    _quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
    settings.register_profile("kernelkit", deadline=None, derandomize=True, suppress_health_check=_quiet)
    settings.register_profile("explore", deadline=None, max_examples=1000, suppress_health_check=_quiet)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kernelkit"))
except ImportError:  # the property tests skip themselves without hypothesis
    pass


def pytest_configure(config):
    # Tests that run on the CPU only (e.g. gloo ranks under torchrun): -k "not cpu" deselects them with the
    # CPU-parametrized cases.
    config.addinivalue_line("markers", "cpu: runs on the CPU only")
