"""The keyword stage of hybrid recall (memory/recall/hybrid.py): full-text relevance of past
episodes to a message, from the database's own index, asked through the engine's search
backend (memory/engine/backend.py: SQLite FTS5 `bm25()`, PostgreSQL the same BM25 over a
GIN-indexed tsvector), kept in step with `episode_summaries` by triggers (migration 0002) over
the summary and the source conversation.

hybrid.keyword_stage gives each episode it scores a relevance ∈ [0, 1]: its full-text score as
a share of the query's best one, times how much of the query's information (idf-weighted share
of its words) that best match holds — so a message that only shares common words with the past
stays near 0 (see `coverage`).

Cost on large histories: BM25 must score every episode the MATCH finds, so
- per-word document counts come from the index's vocabulary (SQLite, migration 0003), not a
  COUNT, and are remembered while the index is unchanged;
- query words in a large share of the history (idf ≈ 0 next to the query's rarest word) are left
  out of the MATCH (`match_terms`);
- a query whose every word is common scores a bounded set of episodes (memory/recall/common_words.py);
- the dense candidates the pool left out are scored by id, the way each engine does it cheaply
  (memory/engine/sqlite.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from caesar.memory.engine.postgres import (
    bm25_idf,
    tsquery_text,  # noqa: F401 - re-exported
)
from caesar.memory.engine.sqlite import fts5_match, indexed_rows  # noqa: F401 - re-exported
from caesar.memory.recall.dates import MONTHS
from caesar.memory.scope import Scope

K = TypeVar("K")  # what is scored: an episode id, or (episode id, window number)

MAX_QUERY_TERMS = 32
# A query word in at least COMMON_MIN_DOCS episodes whose idf is under COMMON_IDF_SHARE of the
# query's rarest word's is left out of the MATCH (see match_terms): next to a rare word it adds
# little (ln(1 + 9) ≈ 2.3 for a word in 10 % of episodes against ≈ 11 for one in 1 of 100k),
# yet scoring its doclist is what made the keyword stage slow on large histories. It still
# counts in `coverage`. Below the floor a doclist is cheap to score and nothing is left out.
COMMON_IDF_SHARE = 0.4
COMMON_MIN_DOCS = 500

_TERM = re.compile(r"[^\W_]+", re.UNICODE)
# Function words only: every question has them and they would make every episode a match.
STOP_WORDS = frozenset(
    """a about after again all also am an and any are as at be been before being but by can
    could did do does doing done during each for from had has have having he her here hers him
    his how i if in into is it its itself just me my myself no nor not of off on once only or
    our ours out over own s she should so some such t than that the their theirs them then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself ive im don didn doesn""".split()  # noqa: SIM905
)
# PostgreSQL's english stop words that STOP_WORDS keeps as terms. Its `english` configuration
# dropped them (before migration 0015), so there they were found nowhere, and `coverage` left
# them out on both engines; it still does, so the measured off-topic figures hold.
PG_ONLY_STOP_WORDS = frozenset(
    """above against because below between both down few further herself himself more most now
    other ourselves same themselves yourselves""".split()  # noqa: SIM905
)


def query_terms(query: str) -> list[str]:
    """Distinct lower-case content words of a query, in order (at most MAX_QUERY_TERMS)."""
    seen: dict[str, None] = {}
    for match in _TERM.finditer(
        query
    ):  # stops at the last term kept: a pasted page is not read to its end
        word = match.group().lower()
        if word not in STOP_WORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
            if len(seen) == MAX_QUERY_TERMS:
                break
    return list(seen)


def keyword_scores(
    scope: Scope,
    query: str,
    *,
    model_id: str | None,
    limit: int,
    ids: Iterable[int] | None = None,
    min_created: datetime | None = None,
    terms: list[str] | None = None,
    min_id: int | None = None,
    every: bool = False,
) -> dict[int, float]:
    """Best `limit` of `person`'s episodes (of `model_id` unless None, created ≥ min_created, id ≥ min_id,
    among `ids` if given, holding every term if `every`) by keyword relevance to `query`:
    {episode_id: score > 0}. `terms`, if given, replaces the query's own words (the stage passes
    the ones worth matching). A score depends on the episode and the terms only — not on the
    filters, nor on `every` (bm25 weighs each term by the whole index; PostgreSQL's by the
    person's).
    `backend`: the search backend (by default, that of the session's engine)."""
    terms = query_terms(query) if terms is None else terms
    id_list = None if ids is None else sorted({int(i) for i in ids})
    if not terms or id_list == []:
        return {}
    return scope.search.keyword_scores(
        scope,
        terms,
        limit=limit,
        model_id=model_id,
        ids=id_list,
        min_created=min_created,
        min_id=min_id,
        every=every,
    )


def term_counts(scope: Scope, terms: list[str]) -> tuple[int, list[int]]:
    """(`person`'s indexed episodes, [of them, those containing each term]), by the index's
    own tokenizer, so stemming and stop words agree with the keyword search."""
    return scope.search.term_counts(scope, terms)


def probe_contains(scope: Scope, terms: list[str], probe_id: int) -> list[bool]:
    """Whether `person`'s episode `probe_id` contains each term (by the index's tokenizer)."""
    if not terms:
        return []
    return scope.search.probe_contains(scope, terms, probe_id)


def term_document_counts(
    scope: Scope, terms: list[str], probe_id: int
) -> tuple[int, list[tuple[int, bool]]]:
    """(indexed episodes, [(episodes containing the term, whether `probe_id` does)]), of
    `person`'s."""
    total, counts = term_counts(scope, terms)
    found = probe_contains(scope, terms, probe_id)
    return total, list(zip(counts, found, strict=True))


def match_terms(terms: list[str], total: int, counts: list[int]) -> list[str]:
    """The query terms worth matching: those found somewhere, less the common ones — in at
    least COMMON_MIN_DOCS episodes with an idf under COMMON_IDF_SHARE of the query's most
    informative word's. Relative, because in a small history every word has a similar idf and
    all of them matter. Measured with the floor off (rule forced on every haystack of
    bench/recall_quality.py): LoCoMo R@5 −0.005, MRR −0.006, LongMemEval unchanged; an absolute
    cut (words in > 10 % of episodes) lost 0.2 R@5 on LoCoMo. Pure."""
    found = [(t, n) for t, n in zip(terms, counts, strict=True) if n > 0]
    top = max((_idf(total, n) for _, n in found), default=0.0)
    return [t for t, n in found if n < COMMON_MIN_DOCS or _idf(total, n) >= COMMON_IDF_SHARE * top]


_idf = bm25_idf  # how `coverage` weighs words (kept positive: FTS5's idf floors at ~0)


def coverage(total: int, counts: list[tuple[int, bool]]) -> float:
    """Share of the query's information an episode holds: Σ idf of the query terms it contains
    over Σ idf of all query terms found anywhere (idf = ln(1 + (N − n + ½) / (n + ½)), BM25's,
    kept positive). Terms in no episode are left out here — the same for every candidate, they
    cannot rank one above another; how much of the message the history knows at all is
    `known_share`. Pure; ∈ [0, 1]."""
    weights = [(_idf(total, n), has) for n, has in counts if n > 0]
    mass = sum(w for w, _ in weights)
    return sum(w for w, has in weights if has) / mass if mass > 0 else 0.0


def known_share(
    total: int,
    terms: Sequence[str],
    counts: Sequence[int],
    names: Collection[str] = frozenset(),
) -> float:
    """How much of a message's information the history holds anywhere: Σ idf of its terms
    found in some episode over Σ idf of all of them, a term found nowhere weighing the most
    (idf at n = 0). A message whose distinctive words the past never mentions — an off-topic
    one — gets a low share from the common words it shares with it; the recall threshold is
    applied to the relevance with the keyword side scaled by it (hybrid.rank_candidates).
    A name the message uses (`names`, see `named_words`) that no episode holds makes it 0: the
    history has never heard of whom or what the message is about, so shared common words
    say nothing ("What are Caroline's plans for the summer?" asked of a history without a
    Caroline). Left out: a word naming a time (a month or day name, a number) found nowhere,
    since a conversation's date is not in its words ("what did I buy in March?") — a name that
    is also a month ("June") is taken for the month — and PostgreSQL's english stop words,
    found or not (see PG_ONLY_STOP_WORDS), so both engines weigh the same.
    Measured in docs/recall-quality.md ("Off-topic"). `counts[i]`: episodes holding
    `terms[i]`. Pure; ∈ [0, 1], 1 with nothing to weigh."""
    if names_unknown(terms, counts, names):
        return 0.0
    mass = found = 0.0
    for term, n in zip(terms, counts, strict=True):
        if term in PG_ONLY_STOP_WORDS or (n == 0 and is_time_word(term)):
            continue
        weight = _idf(total, n)
        mass += weight
        found += weight if n > 0 else 0.0
    return found / mass if mass > 0 else 1.0


def names_unknown(terms: Sequence[str], counts: Sequence[int], names: Collection[str]) -> bool:
    """Whether the message names someone or something (`names`, see `named_words`) that no
    episode holds — a month name and PostgreSQL's stop words aside, as in `known_share`: the
    history has never heard of whom it is about. Pure."""
    return any(
        n == 0 and term in names and not is_time_word(term) and term not in PG_ONLY_STOP_WORDS
        for term, n in zip(terms, counts, strict=True)
    )


# What may open a sentence, a quotation or a list item before a capitalised word that is then
# no name; a line break does too.
_OPENERS = frozenset('.!?:;"“‘(«—–-•*#…')
# The assistant's own name: "Thanks, Caesar, what did I say about…" addresses it; it is not
# what the message is about, and past chats rarely spell it.
ASSISTANT_NAMES = frozenset({"caesar"})
# Titles before a name: no name themselves, and their period opens no sentence — in "Dr. Seuss"
# or "St. Mary's" the name is the word after it.
HONORIFICS = frozenset("dr mr mrs ms mx prof st sr jr rev fr capt lt gen sgt col hon".split())


def named_words(text: str, among: Collection[str] | None = None) -> frozenset[str]:
    """The lower-cased words a message capitalises inside a sentence — names ("Ottoline",
    "Lisbon", "Mustang"; after a title such as "Dr." the word that follows, not the title).
    None when over three quarters of its words are capitalised (a title, or all caps), where
    capitals say nothing. `among`: the query's terms — the scan
    stops once it has passed them all (a pasted page is not read to its end). Pure; linear."""
    wanted = set(among) if among is not None else None
    total = capitalised = 0
    names: set[str] = set()
    for m in _TERM.finditer(text):
        word = m.group()
        total += 1
        if word[:1].isupper():
            capitalised += 1
            at = m.start() - 1  # back over the spaces before the word; a line break opens
            while at >= 0 and text[at] in " \t":
                at -= 1
            if at >= 0 and word.lower() not in HONORIFICS and not _opens(text, at):
                names.add(word.lower())
        if wanted is not None:
            wanted.discard(word.lower())
            if not wanted:
                break
    if 4 * capitalised > 3 * total:
        return frozenset()
    return frozenset(names - ASSISTANT_NAMES)


def _opens(text: str, at: int) -> bool:
    """Whether `text[at]`, the character before a word (spaces skipped), opens a sentence."""
    if text[at] == ".":
        start = at
        while start > 0 and text[start - 1].isalpha():
            start -= 1
        return text[start:at].lower() not in HONORIFICS
    return text[at] in _OPENERS or text[at].isspace()


TIME_WORDS = frozenset(MONTHS) | frozenset(
    """jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday""".split()  # noqa: SIM905
)


def is_time_word(term: str) -> bool:
    """A month or day name, or a number: words that name a time. Pure."""
    return term in TIME_WORDS or term.isdigit()


def keyword_relevance(scores: Mapping[K, float], strength: float) -> dict[K, float]:
    """Each score as a share of the best one (BM25's scale depends on the corpus and the
    query), times the best match's `coverage`: so an episode that only shares a common word
    with the query stays near 0 however it ranks, and one holding all its rare words nears 1."""
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return {}
    return {i: min(max(s / best, 0.0), 1.0) * strength for i, s in scores.items()}
