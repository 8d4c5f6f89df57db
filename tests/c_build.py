"""What the tests of the optional C extensions share: whether this machine can build them."""

from __future__ import annotations

import shutil
import sysconfig

import pytest


def skip_without_c_compiler(in_use: str) -> None:
    """Skip the calling test unless the C compiler Python builds extensions with is here.

    The install compiles the extensions when it can; a silent fallback to the slower Python
    code on a machine with a compiler is a broken build, not a choice. ``in_use`` names the
    Python code that runs instead, for the skip's reason.
    """
    compiler = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: {in_use} is the one in use")
