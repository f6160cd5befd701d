"""The HTML report rendered by a real headless Chromium, offline: layout facts and a screenshot.

A probe script (added to a copy of the report, never to the report itself)
measures the page after layout and writes its findings into the DOM, which
``--dump-dom`` returns: every section and case is there and visible, every
chart has a real size and its bars, nothing is wider than the window, and
the page loaded no resource at all (it is self-contained). The screenshot
must hold a real picture, not a blank page. Skipped, with the reason, only
where no Chromium can be found (.ci/run installs Debian's ``chromium``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

PROBE = """
<script>
window.addEventListener("load", () => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; };
  const facts = {
    sections: [...document.querySelectorAll("section")].map((s) => [s.id, ...box(s)]),
    charts: [...document.querySelectorAll("svg.chart")].map((s) => [...box(s), s.querySelectorAll("rect.bar").length]),
    tables: document.querySelectorAll("table").length,
    rules: [...document.querySelectorAll(".rule")].map((r) => r.innerText.startsWith("IF")),
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    resources: performance.getEntriesByType("resource").map((r) => r.name),
    title: document.title,
    font: getComputedStyle(document.body).fontFamily.length > 0,
  };
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(facts);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium on this machine: install Debian's package (apt-get install chromium); "
                ".ci/run installs it when apt is available")


def run_browser(args: list[str], profile: Path, size: str = "1100,900") -> subprocess.CompletedProcess[str]:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={size}",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def page(real_report: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    chromium()
    tmp = tmp_path_factory.mktemp("browser")
    html = (real_report / "report.html").read_text()
    probed = tmp / "probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"))
    return probed, tmp


def test_layout_in_a_real_browser(page: tuple[Path, Path], real_report: Path) -> None:
    probed, tmp = page
    done = run_browser(["--virtual-time-budget=5000", "--dump-dom", probed.as_uri()], tmp / "profile-dom")
    m = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert m, f"no probe output; chromium said: {done.stderr[-2000:]}"
    facts = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                       .replace("&gt;", ">"))
    doc = json.loads((real_report / "report.json").read_text())
    ids = [s[0] for s in facts["sections"]]
    assert ids == ["model", "attribution", "cases", "case-0", "case-1", "case-2", "case-3", "regional",
                   "constraints", "checks"]
    assert all(w > 300 and h > 20 for _, w, h in facts["sections"]), facts["sections"]
    n_features = len([f for f in doc["attribution"]["outputs"][0]["features"] if f["nu"]][:15])
    assert facts["charts"][0][2] == n_features and len(facts["charts"]) == 2
    assert all(w > 200 and h > 50 for w, h, _ in facts["charts"]), facts["charts"]
    assert facts["tables"] >= 10 and all(facts["rules"]) and facts["rules"]
    assert facts["overflow"] <= 0, "the page is wider than the window"
    assert facts["resources"] == [], "the report loaded external resources"
    assert facts["title"] == "Income model" and facts["font"]


def png_pixels(data: bytes) -> tuple[int, int, int, set[bytes]]:
    """Width, height, channels and the distinct colours (sampled) of an 8-bit PNG.

    Pillow when installed; otherwise a small decoder (PNG filters undone row by row)."""
    try:
        import io

        from PIL import Image
    except ImportError:
        return _png_pixels(data)
    im = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = im.size
    px = im.load()
    return w, h, 3, {bytes(px[x, y]) for y in range(0, h, 8) for x in range(0, w, 4)}


def _png_pixels(data: bytes) -> tuple[int, int, int, set[bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    h = depth = ctype = 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            depth, ctype = body[8], body[9]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6)
    ch = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * ch
    prev = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 8 == 0:
            colours.update(bytes(line[x:x + 3]) for x in range(0, stride, ch * 4))
        prev = line
    return w, h, ch, colours


def test_screenshot_shows_the_report(page: tuple[Path, Path]) -> None:
    probed, tmp = page
    shot = tmp / "report.png"
    done = run_browser([f"--screenshot={shot}", probed.as_uri()], tmp / "profile-shot", size="1000,700")
    assert shot.exists(), f"no screenshot; chromium said: {done.stderr[-2000:]}"
    w, h, _, colours = png_pixels(shot.read_bytes())
    assert (w, h) == (1000, 700)
    assert len(colours) > 20, "the screenshot is (nearly) blank"
    blue = {c for c in colours if c[2] > 150 and c[0] < 100}  # the attribution bars and links
    assert blue, "no chart colour on the first screen"


def _encode_png(rows: list[bytes], w: int, filters: list[int]) -> bytes:
    """An RGB PNG whose row ``y`` uses filter ``filters[y]`` (to check the fallback decoder)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    raw = b""
    prev = bytes(3 * w)
    for f, row in zip(filters, rows):
        out = bytearray()
        for i, x in enumerate(row):
            a = row[i - 3] if i >= 3 else 0
            b, c = prev[i], prev[i - 3] if i >= 3 else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else b if pb <= pc else c][f]
            out.append((x - pred) & 255)
        raw += bytes([f]) + bytes(out)
        prev = row
    ihdr = w.to_bytes(4, "big") + len(rows).to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def test_fallback_png_decoder() -> None:
    w = 16
    rows = [bytes((17 * y + 5 * i) % 256 for i in range(3 * w)) for y in range(40)]
    data = _encode_png(rows, w, [y % 5 for y in range(40)])
    width, height, ch, colours = _png_pixels(data)
    assert (width, height, ch) == (w, 40, 3)
    assert colours == {rows[y][x:x + 3] for y in range(0, 40, 8) for x in range(0, 3 * w, 12)}
