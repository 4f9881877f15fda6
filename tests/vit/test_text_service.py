"""The server's store of text relevance results (`attention.vit.text.service`): one job per answer, keyed on what
changes the answer: an option a rule does not read (NACLIP's std for SCLIP, any option for Chefer) finds the
stored result; one it reads (the std for NACLIP, the residual for SCLIP) computes anew."""

from __future__ import annotations

from attention.config import EXAMPLES_DIR
from attention.vit.text import service
from attention.vit.text.openvocab import RuleOptions

DIGIT = str(EXAMPLES_DIR / "digits" / "digit_7.png")


def test_the_store_keys_on_the_options_the_rule_reads(monkeypatch):
    calls = []
    real = service._compute

    def counted(*a, **k):
        calls.append(a[4])  # the rule
        return real(*a, **k)

    monkeypatch.setattr(service, "_compute", counted)
    monkeypatch.setattr(service, "RESULTS", type(service.RESULTS)(8 << 20, 600))

    def ask(rule, **opts):
        return service.get_text_relevance(DIGIT, "digit_clip", "native", "a 7, a 1", rule, RuleOptions(**opts),
                                          shared=False)  # fmt: skip

    sclip = ask("sclip")
    assert ask("sclip", std=2.0, gamma=9.0) is sclip  # options SCLIP does not read: the stored answer
    assert ask("sclip", residual=False) is not sclip  # the residual it reads: a new job
    naclip = ask("naclip")
    assert ask("naclip", std=2.0) is not naclip and ask("naclip", beta=0.3) is naclip
    chefer = ask("chefer")
    assert ask("chefer", residual=False, std=1.0) is chefer
    assert calls == ["sclip", "sclip", "naclip", "naclip", "chefer"]
