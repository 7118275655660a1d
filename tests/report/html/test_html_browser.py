"""The HTML reports in a real browser: headless Chromium opens each README example's page.

Each page loads with no console error, no uncaught exception, no refused request and no network
request; its screenshot is not blank; the numbers the rendered page carries equal the JSON the same
run printed (plan's step, search's winner's step, trace's exposed communication); at 375 px wide
the page does not scroll sideways. One browser for the module, one tab per page.
"""

from __future__ import annotations

import io

import pytest

import chromium_cdp

browser = chromium_cdp.browser
reports = chromium_cdp.reports

PAGES = ("plan", "search", "trace", "timeline", "trace_ranks")


def _not_blank(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of pixels that are not the background) of a PNG screenshot."""
    np = pytest.importorskip("numpy")
    plt = pytest.importorskip("matplotlib.pyplot")
    img = plt.imread(io.BytesIO(png), format="png")
    px = img.reshape(-1, img.shape[-1])[:, :3]
    colours = np.unique((px * 255).round().astype(np.uint8), axis=0)
    background = px[0]
    return len(colours), float(np.mean(np.any(np.abs(px - background) > 0.02, axis=1)))


@pytest.fixture(scope="module")
def tabs(browser, reports):
    """Each page opened once at desktop width."""
    return {name: browser.open(reports[name][0]) for name in PAGES}


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_without_error_or_request(tabs, name):
    tab = tabs[name]
    assert tab.problems() == []
    assert tab.requests() == []
    assert tab.evaluate("document.body.dataset.report") == name.split("_")[0]
    # every chart rendered with a size (an SVG that failed to parse has none)
    sizes = tab.evaluate("Array.from(document.querySelectorAll('svg.chart')).map(s => s.getBBox().width)")
    assert sizes and all(w > 50 for w in sizes)


@pytest.mark.parametrize("name", PAGES)
def test_screenshot_is_not_blank(tabs, name):
    colours, inked = _not_blank(tabs[name].screenshot())
    # a blank page is one colour; text, bars and the chart's colours give dozens at least
    assert colours > 20
    assert inked > 0.02


def test_plan_step_in_the_page_is_the_json_step(tabs, reports):
    d = reports["plan"][1]
    values = tabs["plan"].data_values()
    assert float(values["step_s"]) == d["step_s"]
    assert float(values["memory.capacity_bytes"]) == d["memory"]["capacity_bytes"]
    assert float(values["training.days"]) == d["training"]["days"]
    # the stacked bar's terms add up to the step: compute + bubble + exposed + optimizer + losses
    b = d["breakdown"]
    assert b["compute_s"] + b["pipeline_bubble_s"] + b["exposed_comm_s"] + b["optimizer_s"] + \
        b["losses"]["total_s"] == pytest.approx(d["step_s"], rel=1e-12)


def test_search_winner_step_in_the_page_is_the_json_winner(tabs, reports):
    d = reports["search"][1]
    values = tabs["search"].data_values()
    assert float(values["winner.step_s"]) == d["results"][0]["step_s"]
    assert float(values["results[0].step_s"]) == d["results"][0]["step_s"]
    assert float(values["winner.robust_step_s"]) == d["results"][0]["robust_step_s"]
    assert int(values["evaluated"]) == d["evaluated"]
    # each command is in the page as the JSON writes it, ready to copy
    table = tabs["search"].evaluate("Array.from(document.querySelectorAll('#top .cmd code')).map(c => c.textContent)")
    assert table == [r["plan_command"] for r in d["results"]]
    assert tabs["search"].evaluate("document.querySelector('#winner .cmd code').textContent") == \
        d["results"][0]["plan_command"]


@pytest.mark.parametrize("name", ("trace", "trace_ranks"))
def test_trace_exposed_communication_in_the_page_is_the_json(tabs, reports, name):
    d = reports[name][1]
    values = tabs[name].data_values()
    most = max(r["exposed_communication_s"] for r in d["ranks"])
    assert float(values["exposed_communication_s"]) == most
    for i, r in enumerate(d["ranks"]):
        assert float(values[f"ranks[{i}].exposed_communication_s"]) == r["exposed_communication_s"]


def test_timeline_numbers_in_the_page_are_the_json(tabs, reports):
    d = reports["timeline"][1]
    values = tabs["timeline"].data_values()
    assert float(values["exposed_s"]) == d["exposed_s"]
    assert int(values["best.bucket_bytes"]) == d["best"]["bucket_bytes"]


@pytest.mark.parametrize("name", ("plan", "search"))
def test_at_375_px_the_page_does_not_scroll_sideways(browser, reports, name):
    tab = browser.open(reports[name][0], width=375, height=800, mobile=True)
    assert tab.problems() == [] and tab.requests() == []
    assert tab.evaluate("window.innerWidth") == 375
    # wide tables scroll inside their own box; the page itself fits the window
    assert tab.evaluate("document.documentElement.scrollWidth") <= 375
    assert tab.evaluate("Math.max(...Array.from(document.querySelectorAll('svg.chart'))"
                        ".map(s => s.getBoundingClientRect().right))") <= 375
    colours, inked = _not_blank(tab.screenshot())
    assert colours > 20 and inked > 0.02


def test_the_page_prints(browser, reports):
    import base64

    tab = browser.open(reports["plan"][0])
    pdf = base64.b64decode(browser.call("Page.printToPDF", {"printBackground": False}, session=tab.s)["data"])
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    assert tab.problems() == []


def test_the_checks_catch_a_request_an_error_and_a_blank_page(browser, tmp_path):
    # the checks above must be able to fail: a page that asks the network for an image and logs an
    # error, the same under the reports' policy (the request refused: a logged violation), a blank page
    from commcost.report.html._page import CSP

    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                     "<script>console.error('boom')</script></body></html>")
    tab = browser.open(leaky)
    assert any(u.startswith("http://127.0.0.1:9/") for u in tab.requests())
    assert any("boom" in p for p in tab.problems())
    guarded = tmp_path / "guarded.html"
    guarded.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
                       '</head><body><img src="http://127.0.0.1:9/y.png"></body></html>')
    tab = browser.open(guarded)
    assert tab.problems() != []  # the policy refused the image, and said so
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    colours, inked = _not_blank(browser.open(blank).screenshot())
    assert colours == 1 and inked == 0.0
