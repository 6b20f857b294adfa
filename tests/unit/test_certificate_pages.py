"""The certificate as printed by headless Chromium: at most two A4 pages, and the sign-off
block (the acceptance sentence and the signature lines, or what a run that cannot be
accepted still needs) on one page, for ACCEPTED, REJECTED and INCOMPLETE runs of 1, 4 and
64 nodes with waivers, unreachable nodes and many failures. No lab: synthetic records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import chromium
from tests.certificate_bundle import write_print_case

MARK = "https://hpcnet.test/"
VERDICTS = ("ACCEPTED", "REJECTED", "INCOMPLETE")


def marked(page: str, verdict: str) -> str:
    """The page with a link at the start of the sign-off sentence and one in its last line
    (the last signature line's caption, or the last step needed): their PDF annotations
    say which page each printed on."""
    if verdict == "ACCEPTED":
        start, start_mark = '<p id="acceptance">', f'<a href="{MARK}sentence">The</a>'
        page = page.replace(start + "The", start + start_mark, 1)
        head, _, tail = page.rpartition('<div class="caption">Date</div>')
        return head + f'<div class="caption"><a href="{MARK}lines">Date</a></div>' + tail
    start = "<h3>Nothing to accept"
    page = page.replace(start, f'<h3><a href="{MARK}sentence">Nothing</a> to accept', 1)
    block = page.index('id="not-for-signature"')
    last = page.index("</ul>", block)
    item = page.rindex("<li>", block, last)
    return page[: item + 4] + f'<a href="{MARK}lines">Last</a> ' + page[item + 4 :]


def pdf_pages(pdf: bytes) -> list[set[str]]:
    """The link targets on each page of a PDF Chromium printed, in page order."""
    objects = {
        int(m.group(1)): m.group(2) for m in re.finditer(rb"(\d+) 0 obj\s*(.*?)endobj", pdf, re.S)
    }
    kids = re.search(rb"/Type /Pages.*?/Kids \[([^\]]*)\]", pdf, re.S)
    assert kids is not None, "no page tree"
    pages = []
    for ref in re.findall(rb"(\d+) 0 R", kids.group(1)):
        annots = re.search(rb"/Annots \[([^\]]*)\]", objects[int(ref)])
        refs = re.findall(rb"(\d+) 0 R", annots.group(1)) if annots else []
        uris = {
            m.group(1).decode()
            for r in refs
            if (m := re.search(rb"/URI \(([^)]*)\)", objects.get(int(r), b"")))
        }
        pages.append(uris)
    return pages


def print_pdf(tmp_path: Path, html: Path) -> bytes:
    pdf = tmp_path / "printed.pdf"
    chromium(tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html.as_uri())
    return pdf.read_bytes()


CASES = [
    *((verdict, count, 0, 4) for verdict in VERDICTS for count in (1, 4, 64)),
    # few requirements and one waiver: the sign-off falls where page 1 ends
    ("ACCEPTED", 1, 2, 1),
]


@pytest.mark.parametrize(("verdict", "count", "judged", "waivers"), CASES)
def test_the_certificate_prints_on_two_pages_with_its_sign_off_whole(
    tmp_path, verdict, count, judged, waivers
):
    page = write_print_case(tmp_path / "run", verdict, count, judged, waivers)
    html = page.read_text(encoding="utf-8")
    assert f'class="big">{verdict}<' in html
    copy = page.with_name("certificate-marked.html")
    copy.write_text(marked(html, verdict), encoding="utf-8")
    pages = pdf_pages(print_pdf(tmp_path, copy))
    assert 1 <= len(pages) <= 2, f"{verdict} at {count} nodes prints on {len(pages)} pages"
    sentence = [i for i, links in enumerate(pages) if MARK + "sentence" in links]
    lines = [i for i, links in enumerate(pages) if MARK + "lines" in links]
    assert sentence and lines, (sentence, lines)
    assert sentence == lines, f"the sign-off splits: sentence on {sentence}, lines on {lines}"


def test_the_page_reader_finds_links_page_by_page(tmp_path):
    """The check above can fail: a forced page break between the two marks is seen."""
    html = tmp_path / "split.html"
    html.write_text(
        f'<p><a href="{MARK}sentence">a</a></p>'
        f'<p style="break-before: page"><a href="{MARK}lines">b</a></p>'
    )
    assert pdf_pages(print_pdf(tmp_path, html)) == [{MARK + "sentence"}, {MARK + "lines"}]
