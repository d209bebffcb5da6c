"""The published coverage list (torch_plugin/COVERAGE.md) matches the registrations."""
import os
import subprocess
import sys

from conftest import REPO


def test_coverage_list_is_current():
    r = subprocess.run([sys.executable, os.path.join(REPO, "torch_plugin", "tools", "gen_coverage.py"), "--check"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_coverage_list_names_new_kernels():
    text = open(os.path.join(REPO, "torch_plugin", "COVERAGE.md")).read()
    for op in ("`sin`", "`cumsum`", "`sort`", "`_scaled_dot_product_fused_attention_overrideable`", "`mv`"):
        assert op in text
