"""The calculator tab in Chromium: edit a cell of Q and watch the weights and the output change."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot
from tests.ui.pages import calculator_page, calculator_tab


def _table_text(pg, title: str) -> str:
    """The text of the report card whose heading starts with `title` (its tables' numbers)."""
    return pg.locator("#qkv-report .qkv-card", has=pg.locator("h4", has_text=title)).inner_text()


@pytest.mark.browser
def test_editing_a_cell_of_q_changes_weights_and_output(page):
    pg = page
    calculator_tab(pg)
    assert "equal to torch.nn.functional.scaled_dot_product_attention" in pg.locator("#qkv-checks").inner_text()
    weights, output = _table_text(pg, "4. Softmax weights"), _table_text(pg, "5. Output")
    assert "0.3726" in weights  # preset: q1 = e1 finds key 1 with weight e^(1/sqrt 3) / (e^(1/sqrt 3) + 3)

    cell = pg.locator('#qkv-table-q [data-testid="cell-0-0"]')
    cell.dblclick()
    box = pg.locator("#qkv-table-q input, #qkv-table-q textarea").first
    box.fill("5")
    box.press("Enter")
    pg.wait_for_function(
        "old => { const c = [...document.querySelectorAll('#qkv-report .qkv-card')]"
        ".find(e => e.querySelector('h4').textContent.startsWith('4.')); return c && c.innerText !== old; }",
        arg=weights,
    )
    new_weights, new_output = _table_text(pg, "4. Softmax weights"), _table_text(pg, "5. Output")
    assert new_weights != weights and new_output != output
    assert "0.8567" in new_weights  # q1 = (5, 0, 0): e^(5/sqrt 3) / (e^(5/sqrt 3) + 3) = 0.8567
    assert "equal to torch" in pg.locator("#qkv-checks").inner_text()

    pg.locator("#qkv-mask-mode").get_by_label("causal").check()
    pg.wait_for_selector("#qkv-report .qkv-inf")  # masked entries shown as -inf
    assert "−inf" in _table_text(pg, "3. Masked")
    pg.locator("#qkv-mask-mode").get_by_label("custom 0/1").check()  # starts from the causal pattern
    pg.wait_for_function("() => document.querySelector('#qkv-mask textarea').value.startsWith('1 0 0 0')")
    screenshot(pg, "calculator")


@pytest.mark.browser
def test_text_mode_and_a_bad_cell_give_a_clear_error(page):
    pg = page
    pg.get_by_role("tab", name="Q/K/V calculator").click()
    pg.locator("#qkv-edit-as").get_by_label("Text").check()
    q = pg.locator("#qkv-text-q textarea")
    q.wait_for()
    assert q.input_value().splitlines()[0] == "1 0 0"  # the table, carried over as text
    q.fill("1 0 0\n0 1 0\n0 0 1\n1 1 0\n1 1 oops")
    pg.locator("#qkv-go").click()
    toast = pg.get_by_test_id("toast-body").first
    toast.wait_for()
    assert "'oops'" in toast.inner_text() and "row 4" in toast.inner_text()  # rows counted from 0
    q.fill("1 0; 0 1")
    pg.locator("#qkv-go").click()
    pg.get_by_test_id("toast-body").filter(has_text="2 x 2 and K is 4 x 3").wait_for()  # both shapes named


# every header cell's left and right edge against its table's box and the viewport
_COLUMNS = """n => { const b = document.querySelector('#qkv-table-' + n); const r = b.getBoundingClientRect();
  return {block: [r.left, r.right], page: document.documentElement.clientWidth,
          cells: [...b.querySelectorAll('thead th')].map(th => { const c = th.getBoundingClientRect();
                                                                 return [c.left, c.right]; })}; }"""


@pytest.mark.browser
@pytest.mark.parametrize("width, height", [(1400, 1000), (390, 844)])
def test_from_x_shows_every_column_of_x_and_the_weights(browser, app_url, width, height):
    with calculator_page(browser, app_url, (width, height)) as pg:
        pg.locator("#qkv-mode").get_by_label("From X", exact=False).check()
        pg.locator("#qkv-report h4", has_text="0. Projections").wait_for()  # the mode recalculates
        assert "X W_q" in pg.locator("#qkv-about").inner_text()  # the text describes the mode, not the preset
        assert pg.locator("#qkv-preset input").input_value() == ""  # which no longer names what is shown
        for n in ("x", "w_q", "w_k", "w_v"):
            pg.locator(f"#qkv-table-{n} thead th").first.wait_for()
            box = pg.evaluate(_COLUMNS, n)
            assert len(box["cells"]) == 4, n
            (left, right), page = box["block"], box["page"]
            assert right <= page, f"{n} runs off the page"
            for a, b in box["cells"]:
                assert left - 1 <= a and b <= right + 1, f"a column of {n} is hidden: {box}"
        assert not pg.locator("#qkv-table-w_o").is_visible()  # W_o only once ticked
        pg.locator("#qkv-use-wo input").check()
        pg.locator("#qkv-table-w_o").wait_for()
        screenshot(pg, f"calculator_from_x_{width}")


@pytest.mark.browser
def test_a_bad_cell_is_outlined_and_the_old_results_are_marked_stale_until_fixed(page):
    pg = page
    calculator_tab(pg)
    weights = _table_text(pg, "4. Softmax weights")
    assert not pg.locator("#qkv-stale-note").is_visible()

    def edit_k(value: str) -> None:
        pg.locator("#qkv-about").click()  # leave any open cell
        pg.locator('#qkv-table-k [data-testid="cell-1-1"]').dblclick()
        box = pg.locator("#qkv-table-k textarea").first
        box.fill(value)
        box.press("Enter")

    edit_k("x1")
    note = pg.locator("#qkv-stale-note")
    note.wait_for()
    assert "'x1' (row 1, column 1)" in note.inner_text() and "previous valid input" in note.inner_text()
    # the note is drawn by the failed job's failure handler, after the job's error has reached the page
    # (where a visible error would have made its toast): said once, in the note, no toast over it
    assert pg.get_by_test_id("toast-body").count() == 0
    pg.wait_for_selector("#qkv-report.qkv-stale")  # the old results, dimmed
    assert _table_text(pg, "4. Softmax weights") == weights
    assert "qkv-fault" in pg.locator("#qkv-table-k").get_attribute("class")  # only the matrix at fault
    for other in ("#qkv-table-q", "#qkv-table-v", "#qkv-heads"):
        assert "qkv-fault" not in pg.locator(other).get_attribute("class"), other
    screenshot(pg, "calculator_stale")

    edit_k("2")
    note.wait_for(state="hidden")
    pg.wait_for_selector("#qkv-report:not(.qkv-stale)")
    assert "qkv-fault" not in pg.locator("#qkv-table-k").get_attribute("class")
    assert _table_text(pg, "4. Softmax weights") != weights


@pytest.mark.browser
def test_scores_beyond_float64_are_exact_and_named_on_the_page(page):
    pg = page
    pg.get_by_role("tab", name="Q/K/V calculator").click()
    pg.locator("#qkv-edit-as").get_by_label("Text").check()
    for name, text in (("q", "1e200 1; 1 1"), ("k", "1e200 1; 1 1"), ("v", "1 0; 0 1")):
        box = pg.locator(f"#qkv-text-{name} textarea")
        box.wait_for()
        box.fill(text)
    pg.locator("#qkv-go").click()
    notes = pg.locator("#qkv-notes")
    notes.get_by_text("exceed float64", exact=False).wait_for()
    assert "query 0, key 0 (about 1.0e+400)" in notes.inner_text()  # counted from 0
    checks = pg.locator("#qkv-checks").inner_text()
    assert "row 0 skipped" in checks and "= nan" not in checks.lower()
    weights = pg.locator("#qkv-report .qkv-card", has=pg.locator("h4", has_text="4. Softmax weights"))
    cells = [c.inner_text().strip() for c in weights.locator("td").all()]
    assert cells[:2] == ["1", "0"], cells  # the exact weights of query 0 (float64 alone gives 0, 1)
    screenshot(pg, "qkv_overflow")
