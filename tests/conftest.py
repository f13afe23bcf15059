# pytest: the helpers of tests/support (torch_testing) are importable from every test folder.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
