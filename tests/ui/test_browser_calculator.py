"""The calculator tab in Chromium: edit a cell of Q and watch the weights and the output change."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot


def _table_text(pg, title: str) -> str:
    """The text of the report card whose heading starts with `title` (its tables' numbers)."""
    return pg.locator("#qkv-report .qkv-card", has=pg.locator("h4", has_text=title)).inner_text()


@pytest.mark.browser
def test_editing_a_cell_of_q_changes_weights_and_output(page):
    pg = page
    pg.get_by_role("tab", name="Q/K/V calculator").click()
    pg.wait_for_selector("#qkv-report .qkv-card")
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
    assert "'oops'" in toast.inner_text() and "row 5" in toast.inner_text()
    q.fill("1 0; 0 1")
    pg.locator("#qkv-go").click()
    pg.get_by_test_id("toast-body").filter(has_text="2 x 2 and K is 4 x 3").wait_for()  # both shapes named
