"""WebTailBench's frames as stagehand's ScreenshotCollector keeps them (commit
9971a7b3d8ecca255b4548cfb9128657c053cca7, packages/evals/utils/ScreenshotCollector.ts):
first and final always, near-duplicates of the last kept frame dropped (MSE < 30, else
SSIM >= 0.75 on 400x300), at most 8, oldest out first."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from PIL import Image

from rmsweb.judge import webtailbench
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.webtailbench import near_duplicate, select_frames


def noise(seed: int, size: tuple[int, int] = (80, 60)) -> bytes:
    """A frame unlike any other seed's (independent noise: SSIM near 0)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return _png(pixels)


def _png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "PNG")
    return buf.getvalue()


def shifted(png: bytes, delta: int) -> bytes:
    """The same frame a little brighter: another picture to MSE, the same one to SSIM."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    return _png(np.clip(pixels + delta, 0, 255).astype(np.uint8))


def dotted(png: bytes) -> bytes:
    """The same frame with one pixel changed (a blinking cursor): MSE far below 30."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).copy()
    pixels[0, 0] = 255 - pixels[0, 0]
    return _png(pixels)


def test_repeated_frames_no_longer_push_the_evidence_out() -> None:
    """The first page (the search) and the result are kept however long the agent stalls;
    the last 8 raw frames would have lost the first one."""
    start, stall, result = noise(0), noise(1), noise(2)
    frames = [start, *[stall] * 8, result]
    assert frames[-8:] == [stall] * 7 + [result]  # what the judge used to see
    assert select_frames(frames) == [start, stall, result]


def test_near_duplicates_by_mse_and_by_ssim() -> None:
    a = noise(3)
    cursor, brighter, other = dotted(a), shifted(a, 12), noise(4)
    comparable = webtailbench._comparable
    assert webtailbench.mse(comparable(a)[0], comparable(cursor)[0]) < 30
    # a brightness shift: MSE says different (12^2 = 144 >= 30), SSIM says the same
    assert webtailbench.mse(comparable(a)[0], comparable(brighter)[0]) >= 30
    assert webtailbench.ssim(comparable(a)[1], comparable(brighter)[1]) >= 0.75
    assert near_duplicate(comparable(a), comparable(cursor))
    assert near_duplicate(comparable(a), comparable(brighter))
    assert not near_duplicate(comparable(a), comparable(other))
    assert select_frames([a, cursor, brighter, other, noise(5)]) == [a, other, noise(5)]


def test_compared_with_the_last_kept_frame_not_the_previous_one() -> None:
    """A page that changes a tenth at a time (60 rows, 6 more replaced each frame): each
    frame is a near-duplicate of the one before it (SSIM ~0.9), but the collector compares
    with the last frame it kept, so the third change (SSIM ~0.7 against it) is kept."""
    old = np.random.default_rng(30).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    new = np.random.default_rng(31).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    frames = []
    for k in range(6):
        pixels = old.copy()
        pixels[: 6 * k] = new[: 6 * k]
        frames.append(_png(pixels))
    comparable = [webtailbench._comparable(f) for f in frames]
    assert all(near_duplicate(x, y) for x, y in itertools.pairwise(comparable))
    assert select_frames(frames) == [frames[0], frames[3], frames[5]]


def test_the_final_page_is_kept_even_when_it_repeats() -> None:
    a, b = noise(8), noise(9)
    assert select_frames([a, b, b]) == [a, b, b]  # the collector's "final" capture
    assert select_frames([a]) == [a]


@pytest.mark.parametrize("n", [8, 9, 12])
def test_at_most_eight_frames_oldest_out_first(n: int) -> None:
    frames = [noise(10 + i) for i in range(n)]
    assert select_frames(frames) == frames[-8:]
    assert select_frames(frames, 3) == frames[-3:]


def test_the_judge_is_shown_the_selected_frames() -> None:
    start, stall, result = noise(20), noise(21), noise(22)
    inp = JudgeInput("e", "t", "Find it.", "Done.", screenshots=[start, *[stall] * 9, result])
    parts = webtailbench.build_messages(inp)[1]["content"]
    assert "I'm providing 3 screenshots" in parts[0]["text"]
    assert [p["type"] for p in parts[1:]] == ["image_url"] * 3
