"""Message projections through real files: restore derives what the writer derived, and a
stored decision the interpreter refuses is committed corruption, located by line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_store.errors import CorruptLogError
from dsh_store.model import Session
from dsh_store.restore import read_log
from dsh_store.verify import verify_path

from .helpers import CWD, make_store


def _prompt_with_images() -> dict[str, object]:
    images = [
        {
            "type": "image",
            "attachment": {"attachmentId": f"sha256:{name}", "mediaType": "image/png"},
        }
        for name in ("a", "b")
    ]
    return {
        "role": "user",
        "id": "m-img",
        "content": [{"type": "text", "text": "look"}, *images],
        "source": {"kind": "user"},
    }


def _offloading_log(tmp_path: Path) -> tuple[Path, list[Any]]:
    store = make_store(tmp_path / "root")
    with store.new("s", cwd=CWD) as live:
        live.append("turn/start", {"turn": 1})
        live.append("step/start", {"turn": 1, "step": 1})
        live.append("user/message", _prompt_with_images(), surface_op="append")
        live.append("image/offload", {"targets": [{"seq": 2, "imageIndexes": [0]}]})
        live.flush()
        return live.path, live.session.derive_messages()


def test_a_restored_log_derives_the_offloaded_messages(tmp_path: Path) -> None:
    path, written = _offloading_log(tmp_path)
    inspection = read_log(path)
    restored = Session.from_restore(inspection.header, inspection.events)
    assert restored.derive_messages() == written
    assert written[0]["content"][1]["offloaded"] is True
    assert "offloaded" not in written[0]["content"][2]
    (report,) = verify_path(path)
    assert report.classification == "open-turn"  # the turn was left open; nothing worse


def test_a_stored_decision_the_interpreter_refuses_is_corruption(tmp_path: Path) -> None:
    path, _ = _offloading_log(tmp_path)
    bad = {
        "type": "image/offload",
        "seq": 4,
        "time": 5,
        "data": {"targets": [{"seq": 2, "imageIndexes": [0]}]},
    }
    with open(path, "ab") as log:
        log.write(orjson.dumps(bad) + b"\n")  # image 0 is offloaded already
        log.write(
            orjson.dumps(
                {
                    "type": "turn/end",
                    "seq": 5,
                    "time": 5,
                    "data": {"turn": 1, "reason": {"kind": "completed"}},
                }
            )
            + b"\n"
        )
    with pytest.raises(CorruptLogError) as caught:
        read_log(path)
    assert caught.value.rule == "image-offload-already-offloaded"
    assert (caught.value.line, caught.value.seq) == (6, 4)  # the header is line 1
    (report,) = verify_path(path)
    assert report.classification == "corrupt"
    assert [f.rule for f in report.findings][-1] == "image-offload-already-offloaded"
