"""Issue 20: what kills the survivors of the complete mutation runs over ``ranking.py`` and ``episodes.py``
(helper m1). Expected values are literals from the docstrings."""

from __future__ import annotations

from agtos.tasks.ranking import named_speakers, without_speakers

# Yoruba "Bọ̀dé" in NFC: "ọ" (U+1ECD) keeps its tone mark as a combining grave (U+0300), no precomposed form
BODE = "B\u1ecd\u0300d\u00e9"


def test_a_speakers_name_matches_without_a_mark_nfc_cannot_compose() -> None:
    # _unaccented: "matches it also written without its accents"; the grave folded to "" and was required
    assert without_speakers("What did Bode say about the trip?", [BODE, "Omar"]) == "What did say about the trip?"
    assert without_speakers("What did B\u1ecdd\u00e9 say about the trip?", [BODE]) == "What did say about the trip?"
    assert without_speakers(f"What did {BODE} say about the trip?", [BODE]) == "What did say about the trip?"
    assert named_speakers("What did Bode say about the trip?", [BODE, "Omar"]) == {"b\u1ecd\u0300d\u00e9"}
