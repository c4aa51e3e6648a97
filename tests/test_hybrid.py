"""Hybrid recall (issue #6): the keyword index on both engines, the fusion's properties, and an
end-to-end recall of a conversation that only its words (not its summary's meaning) find."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import OWNER
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event, text

from caesar import audit, people
from caesar.db.models import EpisodeSummary
from caesar.memory.recall import hybrid, keywords
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up
from tests.memory_helpers import engine_scope

NOW = datetime(2026, 5, 18, 12, 0)


@dataclass(frozen=True)
class Params:
    top_k: int = 3
    similarity_threshold: float | None = 0.45
    max_age_days: float | None = None
    halflife_days: float = 30.0
    recall_weight_scale: float = 0.25
    fusion: hybrid.Fusion = "hybrid"
    keyword_weight: float = 0.7
    ranking: hybrid.Ranking = "adr"  # the formula these tests pin; the prior has its own
    comparable_within: float = 0.03
    date_weight: float = 0.5
    said_pool: bool = False


# -- the keyword index, kept by triggers, on SQLite (FTS5) and PostgreSQL (tsvector) ----------
def _chat(session, messages, reply, when=NOW):
    payload = {"messages": messages, "reply": reply}
    return (
        audit.Audit()
        .append(engine_scope(session, OWNER), audit.CHAT_COMPLETED, payload, created_at=when)
        .id
    )


def _episode(session, audit_id, summary, when=NOW):
    row = EpisodeSummary(
        audit_log_id=audit_id,
        summary=summary,
        embedding=[1.0],
        model="m",
        created_at=when,
        person_id=OWNER,
    )
    session.add(row)
    session.flush()
    return row.id


def _search(db, query, **kwargs):
    with db.read() as session:
        return keywords.keyword_scores(
            engine_scope(session, OWNER), query, model_id="m", limit=10, **kwargs
        )


def test_index_follows_episodes_on_both_engines(migrated_db):
    with migrated_db.write() as session:
        chat = _chat(
            session,
            [
                {"role": "system", "content": "Recalled: the operator owns a kayak"},
                {"role": "user", "content": "My sourdough starters keep dying"},
            ],
            "Feed them rye flour twice a day.",
        )
        trivial = _chat(session, [{"role": "user", "content": "hi"}], "hello zebra")
        episode = _episode(session, chat, "We talked about baking bread.")
        _episode(session, trivial, "")

    assert set(_search(migrated_db, "bread")) == {episode}  # the summary
    assert set(_search(migrated_db, "What was that about rye?")) == {episode}  # the reply
    assert set(_search(migrated_db, "sourdough starter")) == {episode}  # a user turn, stemmed
    assert _search(migrated_db, "kayak") == {}  # injected memory is not the conversation
    assert _search(migrated_db, "zebra") == {}  # empty (trivial) summaries are not recallable
    assert _search(migrated_db, "bread", ids=[episode + 100]) == {}
    assert _search(migrated_db, "bread", min_created=NOW + timedelta(days=1)) == {}

    with migrated_db.write() as session:
        session.execute(
            text("UPDATE episode_summaries SET summary = 'We discussed pastry.' WHERE id = :id"),
            {"id": episode},
        )
    assert _search(migrated_db, "bread") == {}
    assert set(_search(migrated_db, "pastry")) == {episode}

    with migrated_db.write() as session:  # retention deletes the chat: the index follows
        session.execute(text("DELETE FROM audit_log WHERE id = :id"), {"id": chat})
    assert _search(migrated_db, "pastry rye sourdough") == {}


def test_more_matching_words_score_higher_on_both_engines(migrated_db):
    with migrated_db.write() as session:
        one = _episode(
            session, _chat(session, [{"role": "user", "content": "a trip to Lisbon"}], "ok"), "x"
        )
        both = _episode(
            session,
            _chat(session, [{"role": "user", "content": "a trip to Lisbon with Alice"}], "ok"),
            "x",
        )
        _episode(session, _chat(session, [{"role": "user", "content": "tax forms"}], "ok"), "x")
    scores = _search(migrated_db, "Lisbon with Alice?")
    assert set(scores) == {one, both} and scores[both] > scores[one] > 0
    with migrated_db.read() as session:
        total, counts = keywords.term_document_counts(
            engine_scope(session, OWNER), ["lisbon", "alice", "unheard"], both
        )
    assert total == 3 and counts == [(2, True), (1, True), (0, False)]


def test_term_counts_follow_the_index_tokenizer_on_both_engines(migrated_db):
    """The counts (SQLite: read from the fts5vocab table by the query word's stem) equal the
    number of episodes a keyword search for the word finds, through inserts and deletes."""
    texts = ["We went hiking at dawn", "The hikes were long", "Coffee at the café", "tax forms"]
    with migrated_db.write() as session:
        ids = [
            _episode(session, _chat(session, [{"role": "user", "content": t}], "ok"), "x")
            for t in texts
        ]
    words = ["hiked", "hiking", "cafe", "café", "tax", "unheard", "42"]

    def check(expected_total):
        with migrated_db.read() as session:
            total, counts = keywords.term_counts(engine_scope(session, OWNER), words)
            has = keywords.probe_contains(engine_scope(session, OWNER), words, ids[0])
        assert total == expected_total
        assert counts == [len(_search(migrated_db, w)) for w in words]
        assert has == [ids[0] in _search(migrated_db, w) for w in words]
        return counts

    assert check(4)[:2] == [2, 2]  # stemmed ("cafe" finds "café" on SQLite only)
    with migrated_db.write() as session:
        session.execute(text("DELETE FROM episode_summaries WHERE id = :id"), {"id": ids[1]})
    assert check(3)[:2] == [1, 1]


def test_a_persons_total_follows_moves_and_deletes_on_both_engines(migrated_db):
    """The idfs' N is the person's episodes (PostgreSQL keeps it by trigger, migration 0014):
    an episode given to another person moves from one total to the other, and a delete
    leaves it at once."""
    with migrated_db.write() as session:
        other, _token = people.add(session, audit.Audit(), "Ben")
        texts = ["kayak on the lake", "tax forms", "piano recital"]
        ids = [
            _episode(session, _chat(session, [{"role": "user", "content": t}], "ok"), "x")
            for t in texts
        ]
        ben = other.id

    def totals():
        with migrated_db.read() as session:
            return tuple(
                keywords.term_counts(engine_scope(session, p), ["kayak"])[0] for p in (OWNER, ben)
            )

    assert totals() == (3, 0)
    with migrated_db.write() as session:
        session.execute(
            text("UPDATE episode_summaries SET person_id = :p WHERE id = :id"),
            {"p": ben, "id": ids[0]},
        )
    assert totals() == (2, 1)
    with migrated_db.write() as session:
        session.execute(
            text("DELETE FROM episode_summaries WHERE id IN (:a, :b)"), {"a": ids[1], "b": ids[2]}
        )
    assert totals() == (0, 1)


@pytest.mark.parametrize(
    "hostile",
    ['"', 'a" OR "b', "NEAR(x y)", "col:word", "x AND NOT y", "*", "(", "' ; DROP TABLE x"],
)
def test_query_syntax_is_never_interpreted(migrated_db, hostile):
    _search(migrated_db, hostile)  # no syntax error on either engine


# -- pure parts -------------------------------------------------------------------------------
def test_query_terms_drop_function_words_and_punctuation():
    assert keywords.query_terms("When did I go to the LGBTQ support-group, and why?") == [
        "go",
        "lgbtq",
        "support",
        "group",
    ]
    assert keywords.query_terms("what is it?") == []
    assert keywords.fts5_match(["a", "b"]) == '"a" OR "b"'
    assert keywords.tsquery_text(["a", "b"]) == "a | b"


unit = st.floats(min_value=0.0, max_value=1.0)
cosine = st.floats(min_value=-1.0, max_value=1.0)


@given(cosine, unit, unit, unit)
def test_hybrid_fusion_is_in_cosine_units_and_monotone(c, k1, k2, w):
    fused = hybrid.fuse(np.array([c, c]), np.array([k1, k2]), method="hybrid", keyword_weight=w)
    assert fused[0] >= c - 1e-12 and fused[0] <= max(c, 1.0) + 1e-12  # never below the cosine
    if k1 <= k2:
        assert fused[0] <= fused[1] + 1e-12  # more keyword evidence never ranks lower
    no_keyword = hybrid.fuse(np.array([c]), np.array([0.0]), method="hybrid", keyword_weight=w)
    assert no_keyword[0] == pytest.approx(c)  # no keyword match: the ADR's cosine


def test_dense_fusion_is_the_cosine_and_rrf_ranks():
    cos, kw = np.array([0.9, 0.2, 0.5]), np.array([0.0, 1.0, 0.5])
    assert list(hybrid.fuse(cos, kw, method="dense", keyword_weight=0.7)) == list(cos)
    rrf = hybrid.fuse(cos, kw, method="rrf", keyword_weight=0.5)
    assert rrf[0] == pytest.approx(0.5 / 61) and rrf[1] == pytest.approx(0.5 / 63 + 0.5 / 61)
    with pytest.raises(ValueError, match="unknown fusion"):
        hybrid.fuse(cos, kw, method="magic", keyword_weight=0.5)  # type: ignore[arg-type]


def test_coverage_weighs_rare_words_more():
    # 100 episodes; "the operator's dog" is in 90 of them, "biscuit" in 2: holding "biscuit"
    # is most of what the query says.
    rare = keywords.coverage(100, [(90, False), (2, True)])
    common = keywords.coverage(100, [(90, True), (2, False)])
    assert rare > 0.8 and common < 0.2 and rare + common == pytest.approx(1.0)
    # a word in no episode is the same for every candidate: it ranks none above another
    assert keywords.coverage(100, [(0, False), (5, True)]) == 1.0
    assert keywords.coverage(0, []) == 0.0
    assert keywords.keyword_relevance({1: 8.0, 2: 2.0}, 0.5) == {1: 0.5, 2: 0.125}
    assert keywords.keyword_relevance({}, 1.0) == {}


def test_known_share_weighs_the_words_the_history_never_mentions():
    # "How many vintage coins do I have?" asked of a history that talks of vintage cars but
    # never of coins: it knows the common word, not what the message is about.
    assert keywords.known_share(100, ["vintage", "coins"], [5, 0]) < 0.5
    assert keywords.known_share(100, ["vintage", "cars"], [5, 9]) == 1.0
    # a date is not in a conversation's words: "march" and "2023" found nowhere don't count
    assert keywords.known_share(100, ["bought", "bike", "march", "2023"], [8, 3, 0, 0]) == 1.0
    assert keywords.known_share(100, [], []) == 1.0


def test_a_name_the_history_never_mentions_means_it_knows_nothing_of_the_message():
    # "What are Caroline's plans for the summer?" asked of a history with plans and summers
    # but no Caroline
    names = keywords.named_words("What are Caroline's plans for the summer?")
    assert names == {"caroline"}
    terms, counts = ["caroline", "plans", "summer"], [0, 9, 4]
    assert keywords.known_share(100, terms, counts) > 0.3
    assert keywords.known_share(100, terms, counts, names) == 0.0
    # a name the history holds is a word like any other
    assert keywords.known_share(100, terms, [2, 9, 4], names) == 1.0


def test_a_name_is_unknown_when_no_episode_holds_it_a_month_aside():
    names = keywords.named_words("What did Ottoline say in June?")
    assert names == {"ottoline", "june"}
    terms = ["ottoline", "say", "june"]
    assert keywords.names_unknown(terms, [0, 5, 0], names)
    assert not keywords.names_unknown(terms, [2, 5, 0], names)  # June is a month, not a stranger
    # PostgreSQL's parser drops its stop words, so neither engine calls them strangers
    assert not keywords.names_unknown(["same", "say"], [0, 5], {"same"})


def test_named_words_are_the_capitalised_words_inside_a_sentence():
    assert keywords.named_words("Caroline went to Lisbon. Then she left.") == {"lisbon"}
    assert keywords.named_words("Where did you say to find parts for my Mustang?") == {"mustang"}
    assert keywords.named_words('Would she like "The Four Seasons" by Vivaldi?') == {
        "four",
        "seasons",
        "vivaldi",
    }
    # a title, or shouting: capitals say nothing
    assert keywords.named_words("How Do I Fix My Car") == frozenset()
    assert keywords.named_words("WHERE IS MY CAR") == frozenset()
    assert keywords.named_words("i tried the thermostat thing you suggested") == frozenset()
    # a new line or a dash opens a sentence too; an apostrophe inside a name does not
    assert keywords.named_words("ok thanks\nRemind me what we said about Lisbon") == {"lisbon"}
    assert keywords.named_words("Sure — Tell me about the Ottoline thing") == {"ottoline"}
    assert keywords.named_words("Did you meet O'Brien?") == {"o", "brien"}
    # a title is no name, and its period ends no sentence: the name is the word after it
    assert keywords.named_words("Would she like books by Dr. Seuss?") == {"seuss"}
    assert keywords.named_words("The mass at St. Mary's church") == {"mary"}
    assert keywords.named_words("He left. Mr Jones stayed.") == {"jones"}
    # addressing the assistant names no subject
    assert keywords.named_words("Thanks, Caesar, what did Ottoline say?") == {"ottoline"}


def test_known_share_ignores_postgresqls_stop_words_found_nowhere():
    # PostgreSQL's parser drops its english stop words, so there they are found in no episode:
    # they must not count as words new to the history, or the two engines would disagree.
    pg_english = set(
        """i me my myself we our ours ourselves you your yours yourself yourselves he him his
        himself she her hers herself it its itself they them their theirs themselves what which
        who whom this that these those am is are was were be been being have has had having do
        does did doing a an the and but if or because as until while of at by for with about
        against between into through during before after above below to from up down in out on
        off over under again further then once here there when where why how all any both each
        few more most other some such no nor not only own same so than too very s t can will
        just don should now""".split()
    )
    assert pg_english <= keywords.STOP_WORDS | keywords.PG_ONLY_STOP_WORDS
    assert keywords.known_share(100, ["bike", "other"], [3, 0]) == 1.0
    # ...and count on neither engine when some episode holds them (SQLite keeps them)
    assert keywords.known_share(100, ["bike", "other", "unheard"], [3, 40, 0]) == (
        keywords.known_share(100, ["bike", "unheard"], [3, 0])
    )


def test_the_threshold_scales_the_keyword_side_by_what_the_history_knows():
    rows = [(1, 11, "keyword match", NOW, 0), (2, 12, "dense match", NOW, 0)]
    cosine, keyword = {1: 0.1, 2: 0.5}, {1: 1.0}
    everything_known = hybrid.rank_candidates(rows, cosine, keyword, NOW, Params())
    assert [h.episode_id for h in everything_known] == [1, 2]
    assert everything_known[0].gated == everything_known[0].relevance
    # a third of the message is in the history: the keyword match no longer clears 0.45 (it
    # would need 0.1 + 0.7 × 1/3 × 0.9 = 0.31), the dense match is untouched, and the ranking
    # relevance is the same
    partly = hybrid.rank_candidates(rows, cosine, keyword, NOW, Params(), known=1 / 3)
    assert [h.episode_id for h in partly] == [2]
    assert partly[0].gated == partly[0].relevance == pytest.approx(0.5)
    unthresholded = replace(Params(), similarity_threshold=None)
    ranked = hybrid.rank_candidates(rows, cosine, keyword, NOW, unthresholded, known=1 / 3)
    assert [h.episode_id for h in ranked] == [1, 2]
    assert ranked[0].relevance == pytest.approx(0.1 + 0.7 * 0.9)
    assert ranked[0].gated == pytest.approx(0.1 + 0.7 / 3 * 0.9) and ranked[0].known == 1 / 3


def test_match_terms_leave_out_words_common_in_a_large_history():
    terms = ["sleep", "thermostat", "unheard", "plan"]
    big = keywords.COMMON_MIN_DOCS * 200
    # next to rare words, a word in 18 % of a large history is left out; in none: nothing to match
    assert keywords.match_terms(terms, big, [big // 5, 20, 0, 80]) == ["thermostat", "plan"]
    # with no rare word beside them, common words are all the query has: all are matched
    assert keywords.match_terms(terms, big, [big // 5, big // 4, 0, 0]) == ["sleep", "thermostat"]
    # a small history ranks as before: a word in 9 of 10 episodes is still matched
    assert keywords.match_terms(terms, 10, [9, 1, 0, 10]) == ["sleep", "thermostat", "plan"]
    # under the floor nothing is left out, however its idf compares (here ≈ 0.1 of the rare one's)
    floor = keywords.COMMON_MIN_DOCS
    assert keywords.match_terms(["a", "b"], 2 * floor, [floor - 1, 1]) == ["a", "b"]
    assert keywords.match_terms(["a", "b"], 2 * floor, [floor, 1]) == ["b"]


def test_rank_candidates_applies_threshold_to_relevance_then_decay():
    rows = [
        (1, 11, "old, keyword match", NOW - timedelta(days=30), 0),
        (2, 12, "new, weak dense match", NOW, 0),
        (3, 13, "new, unrelated", NOW, 0),
    ]
    hits = hybrid.rank_candidates(rows, {1: 0.2, 2: 0.5, 3: 0.1}, {1: 1.0}, NOW, Params())
    assert [h.episode_id for h in hits] == [2, 1]  # 3 is under the threshold
    old = hits[1]
    assert old.relevance == pytest.approx(0.2 + 0.7 * 0.8) and old.freshness == pytest.approx(0.5)
    assert old.score == pytest.approx(old.relevance * old.freshness * old.recall_weight)
    dense = hybrid.rank_candidates(
        rows, {1: 0.2, 2: 0.5, 3: 0.1}, {1: 1.0}, NOW, Params(fusion="dense")
    )
    assert [h.episode_id for h in dense] == [2]


def test_the_prior_ranking_lets_neither_age_nor_past_recalls_outweigh_relevance():
    rows = [
        (1, 11, "a strong match, old, never recalled", NOW - timedelta(days=200), 0),
        (2, 12, "a weaker one, new, recalled often", NOW, 20),
    ]
    cosine = {1: 0.60, 2: 0.55}
    prior = hybrid.rank_candidates(rows, cosine, {}, NOW, Params(ranking="prior"))
    assert [h.episode_id for h in prior] == [1, 2]
    assert prior[0].score == pytest.approx(0.60) and prior[1].recall_weight > 1.7
    adr = hybrid.rank_candidates(rows, cosine, {}, NOW, Params(ranking="adr"))
    assert [h.episode_id for h in adr] == [2, 1]


# -- end to end: import → summarise → embed → recall ------------------------------------------
def _garden_and_letter(make_services):
    """Services whose history is two chats three days old, summarised offline: one about
    garden beds (in which Ottoline lent a tiller) and one about a cover letter; and the
    garden chat's audit id."""
    services = make_services(
        gateway={"routes": {"memory_summarise": "offline:textrank"}},
        memory={"episodes_summarise": {"enabled": True}},
    )
    from caesar.importer import import_conversations

    chats = [
        [
            ("user", "I am planning the garden beds for spring tomatoes."),
            ("assistant", "Put the tomato beds by the south wall and water the tomatoes deeply."),
            ("user", "Which tomatoes grow best in sunny garden beds? Ottoline lent me a tiller."),
            (
                "assistant",
                "Cherry tomatoes love sunny beds. Tomatoes like compost in the beds too.",
            ),
        ],
        [
            ("user", "Can you help me write a cover letter for a data analyst job?"),
            ("assistant", "Sure: open with the role, then two concrete results you achieved."),
        ],
    ]
    report = import_conversations(
        services,
        [
            {
                "created_at": (NOW - timedelta(days=3)).isoformat(),
                "messages": [{"role": r, "content": c} for r, c in chat],
            }
            for chat in chats
        ],
        scope=Scope(OWNER),
    )
    assert report.imported == 2
    run_until_caught_up(services.workers["memory.summarise"])
    return services, report.audit_ids[0]


def test_keyword_only_match_is_recalled_that_dense_alone_misses(make_services):
    services, garden = _garden_and_letter(make_services)
    # "lent", as the chat says: Porter does not stem "lend" to it, and a message word found in
    # no past conversation counts against every match (keywords.coverage)
    query = "What was it Ottoline lent me?"
    memory = services.episodes
    vector = memory.embed_query(query)

    with services.db.read() as session:
        dense = hybrid.hybrid_search(
            Scope(OWNER, session, memory.backend), query, vector, NOW, Params(fusion="dense")
        )
        found = hybrid.hybrid_search(
            Scope(OWNER, session, memory.backend), query, vector, NOW, Params()
        )
    assert dense == []  # the summary does not mention her: no cosine clears 0.45
    assert [h.audit_log_id for h in found] == [garden]
    hit = found[0]
    assert "Ottoline" not in hit.summary and hit.cosine < 0.45
    assert hit.keyword == pytest.approx(1.0) and hit.relevance >= 0.45
    assert hit.score == pytest.approx(hit.relevance * hit.freshness * hit.recall_weight)


def test_the_keyword_pool_is_read_while_the_message_is_still_being_embedded(make_services):
    """A turn embeds its message on another thread (EpisodeMemory.embed_query_soon) and
    hybrid_search reads what needs no vector — the dates, the keyword pool — before it waits
    for it. Here the vector is held back until the keyword pool's MATCH has run: a search that
    waited for the vector first would never get there."""
    services, garden = _garden_and_letter(make_services)
    query = "What was it Ottoline lent me?"
    memory = services.episodes
    vector = memory.embed_query(query)
    with services.db.read() as session:
        expected = hybrid.hybrid_search(
            Scope(OWNER, session, memory.backend), query, vector, NOW, Params()
        )
    matched = threading.Event()

    def seen(conn, cursor, statement, parameters, context, executemany):
        if "MATCH" in statement:
            matched.set()

    pending: Future[np.ndarray] = Future()
    event.listen(services.db.engine, "before_cursor_execute", seen)
    try:
        with ThreadPoolExecutor(1) as pool:

            def search():
                with services.db.read() as session:
                    return hybrid.hybrid_search(
                        Scope(OWNER, session, memory.backend), query, pending, NOW, Params()
                    )

            found = pool.submit(search)
            try:
                assert matched.wait(10), "the keyword pool waited for the vector"
                assert not found.done()  # it is waiting for the vector now
            finally:
                pending.set_result(vector)
            assert found.result(30) == expected
    finally:
        event.remove(services.db.engine, "before_cursor_execute", seen)
    assert [h.audit_log_id for h in expected] == [garden]
