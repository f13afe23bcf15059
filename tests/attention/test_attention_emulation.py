"""The attention family's kernel emulations (tests/attention/emulation/*.py) in the test command."""
import pytest
from emulations import emulation_scripts, run_emulation


@pytest.mark.cpu
@pytest.mark.parametrize("script", emulation_scripts(__file__), ids=lambda p: p.name)
def test_emulation(script):
    run_emulation(script)
