"""The keyword stage of hybrid recall (memory/search/hybrid.py): full-text relevance of past episodes to
a message, from the database's own index — SQLite FTS5 (`bm25()`) or PostgreSQL (`ts_rank`
over a GIN-indexed tsvector), kept in step with `episode_summaries` by triggers (migration
0002) over the summary and the source conversation.

hybrid.keyword_stage gives each episode it scores a relevance ∈ [0, 1]: its full-text score as
a share of the query's best one, times how much of the query's information (idf-weighted share
of its words) that best match holds — so a message that only shares common words with the past
stays near 0 (see `coverage`).

Cost on large histories: BM25 must score every episode the MATCH finds, so
- per-word document counts come from the index's vocabulary (migration 0003), not a COUNT, and
  are remembered while the index is unchanged;
- query words in a large share of the history (idf ≈ 0 next to the query's rarest word) are left
  out of the MATCH (`match_terms`);
- a query whose every word is common scores a bounded set of episodes (memory/search/common_words.py);
- the dense candidates the pool left out are scored with the rowid filter kept out of FTS5
  (`+rowid IN`): pushed into it, FTS5 restarts — and bm25 recounts every word's documents —
  once per id.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.orm import Session

from caesar.memory.search.dates import MONTHS

K = TypeVar("K")  # what is scored: an episode id, or (episode id, window number)

# Not SQLAlchemy models (FTS5 cannot be declared; PostgreSQL's twin is trigger-maintained):
# the schema-vs-models comparison must skip these (FTS5's shadow tables included).
KEYWORD_TABLES = (
    "episode_fts",
    "episode_fts_data",
    "episode_fts_idx",
    "episode_fts_content",
    "episode_fts_docsize",
    "episode_fts_config",
    "episode_fts_vocab",  # fts5vocab over episode_fts (migration 0003, SQLite only)
    # windows' words (migration 0005, memory/search/window_keywords.py): contentless on SQLite
    "episode_window_fts",
    "episode_window_fts_data",
    "episode_window_fts_idx",
    "episode_window_fts_docsize",
    "episode_window_fts_config",
)

# The summary is what recall shows; a word there counts double a word in the conversation.
SUMMARY_WEIGHT = 2.0
CONVERSATION_WEIGHT = 1.0
# PostgreSQL ts_rank weights for labels {D, C, B, A}; A = summary, B = conversation.
_PG_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"
MAX_QUERY_TERMS = 32
# A query word in at least COMMON_MIN_DOCS episodes whose idf is under COMMON_IDF_SHARE of the
# query's rarest word's is left out of the MATCH (see match_terms): next to a rare word it adds
# little (ln(1 + 9) ≈ 2.3 for a word in 10 % of episodes against ≈ 11 for one in 1 of 100k),
# yet scoring its doclist is what made the keyword stage slow on large histories. It still
# counts in `coverage`. Below the floor a doclist is cheap to score and nothing is left out.
COMMON_IDF_SHARE = 0.4
COMMON_MIN_DOCS = 500
# Must equal migration 0002's FTS5 tokenizer: query words are tokenized with it to look their
# document counts up in the index's vocabulary (porter stems "hiking" to "hike").
SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"
_TOKEN_CACHE_SIZE = 10_000
_DATABASES_CACHED = 16
_token_cache: dict[str, tuple[str, ...]] = {}

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
# PostgreSQL's english stop words that STOP_WORDS keeps as terms: its parser drops them, so
# there they are found nowhere, and `coverage` must not count them as words new to the history.
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


def fts5_match(terms: Iterable[str], *, every: bool = False) -> str:
    """An FTS5 MATCH expression: any of the terms (every one if `every`). Quoted, so no term is
    read as syntax."""
    return (" AND " if every else " OR ").join(f'"{t}"' for t in terms)


def tsquery_text(terms: Iterable[str], *, every: bool = False) -> str:
    """A to_tsquery() argument: any of the terms, or every one (letters and digits only)."""
    return (" & " if every else " | ").join(terms)


def is_sqlite(session: Session) -> bool:
    return session.get_bind().dialect.name == "sqlite"


def driver_rows(session: Session, sql: str, params: Sequence[object]) -> list[Any]:
    """Rows of `sql`, sent to the driver as written with positional parameters (write the
    placeholders with `marks`): for the hot statements of a recall, SQLAlchemy's compile-cache
    lookup, expanding-list processing and row wrapping cost more than SQLite's own work."""
    return list(session.connection().exec_driver_sql(sql, tuple(params)).fetchall())


def marks(session: Session, n: int) -> str:
    """n positional placeholders in the driver's style: sqlite3 '?', psycopg '%s'."""
    return ", ".join(["?" if is_sqlite(session) else "%s"] * n)


@functools.lru_cache(maxsize=1024)
def statement(sql: str, *expanding: str) -> TextClause:
    """text(sql), built once per statement, with `expanding` parameters taking lists: a new
    text() is parsed (its bind parameters found by regex) and its cache key built on every
    execution. Lists go in as parameters, never formatted into the statement, so statements
    repeat and SQLAlchemy's compiled cache is hit."""
    clause = text(sql)
    return clause.bindparams(*(bindparam(n, expanding=True) for n in expanding))


def keyword_scores(
    session: Session,
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
    """Best `limit` episodes (of `model_id` unless None, created ≥ min_created, id ≥ min_id,
    among `ids` if given, holding every term if `every`) by keyword relevance to `query`:
    {episode_id: score > 0}. `terms`, if given, replaces the query's own words (the stage passes
    the ones worth matching). A score depends on the episode and the terms only — not on the
    filters, nor on `every` (bm25 and ts_rank weigh each term by the whole index's counts).
    With neither model_id nor min_created the index is read alone, without the episode rows."""
    terms = query_terms(query) if terms is None else terms
    id_list = None if ids is None else sorted({int(i) for i in ids})
    if not terms or id_list == []:
        return {}
    sqlite = is_sqlite(session)
    key = "f.rowid" if sqlite else "f.episode_id"
    params: dict[str, object] = {"limit": limit}
    where = []
    if model_id is not None:
        where.append("e.model = :model")
        params["model"] = model_id
    if min_created is not None:
        where.append("e.created_at >= :min_created")
        params["min_created"] = min_created
    join = (f"JOIN episode_summaries AS e ON e.id = {key}",) if where else ()
    if min_id is not None:
        where.append(f"{key} >= :min_id")
        params["min_id"] = min_id
    if id_list is not None:
        # On SQLite the list is kept out of FTS5 (unary +: see the module doc); the range
        # around it is pushed into it.
        params.update(ids=id_list, lo=id_list[0], hi=id_list[-1])
        if sqlite:
            where.append("f.rowid BETWEEN :lo AND :hi")
        where.append(f"+{key} IN :ids" if sqlite else f"{key} IN :ids")
    if sqlite:
        params["match"] = fts5_match(terms, every=every)
        score = f"-bm25(episode_fts, {SUMMARY_WEIGHT}, {CONVERSATION_WEIGHT})"
        tables = ["episode_fts AS f", *join]
        where.insert(0, "episode_fts MATCH :match")
    else:
        params["tsquery"] = tsquery_text(terms)
        score = f"ts_rank('{_PG_WEIGHTS}', f.document, q.query, 1)"
        tables = ["episode_fts AS f", *join, ", to_tsquery('english', :tsquery) AS q(query)"]
        where.insert(0, "f.document @@ q.query")
        if every:  # filtered by the all-words query, ranked by the any-word one (as ever)
            params["every"] = tsquery_text(terms, every=True)
            where.append("f.document @@ to_tsquery('english', :every)")
    sql = f"""
        SELECT {key} AS id, {score} AS score FROM {" ".join(tables)}
        WHERE {" AND ".join(where)} ORDER BY score DESC, {key} DESC LIMIT :limit"""
    rows = session.execute(statement(sql, *(("ids",) if id_list is not None else ())), params)
    return {int(i): float(score) for i, score in rows if score > 0}


def sqlite_tokens(session: Session, words: list[str]) -> dict[str, tuple[str, ...]]:
    """Each word as the index's tokenizer makes it, read back through a per-connection temporary
    FTS5 table with the same tokenizer (SQLite has no tokenize() function). Cached: the mapping
    depends only on the tokenizer."""
    missing = [w for w in words if w not in _token_cache]
    if missing:
        for sql in (
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.caesar_query_fts USING fts5(word, tokenize = '{SQLITE_TOKENIZE}')",
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.caesar_query_vocab USING fts5vocab(temp, caesar_query_fts, 'instance')",
            "DELETE FROM temp.caesar_query_fts",
        ):
            session.execute(text(sql))
        session.execute(
            text("INSERT INTO temp.caesar_query_fts (rowid, word) VALUES (:i, :w)"),
            [{"i": i, "w": w} for i, w in enumerate(missing)],
        )
        sql = "SELECT doc, term FROM temp.caesar_query_vocab ORDER BY doc, offset"
        tokens: dict[int, list[str]] = {}
        for doc, term in session.execute(text(sql)):
            tokens.setdefault(int(doc), []).append(str(term))
        session.execute(text("DELETE FROM temp.caesar_query_fts"))
        if len(_token_cache) + len(missing) > _TOKEN_CACHE_SIZE:
            _token_cache.clear()
        _token_cache.update((w, tuple(tokens.get(i, ()))) for i, w in enumerate(missing))
    return {w: _token_cache[w] for w in words}


def term_counts(session: Session, terms: list[str]) -> tuple[int, list[int]]:
    """(indexed episodes, [episodes containing each term]), by the index's own tokenizer, so
    stemming and stop words agree with the keyword search. SQLite reads the counts from the
    index's vocabulary (episode_fts_vocab; see _sqlite_doc_counts) and the total from FTS5's
    averages record (count(*) on episode_fts reads every row: ~35 ms at 100k episodes)."""
    if is_sqlite(session):
        tokens = sqlite_tokens(session, terms)
        n, docs = _sqlite_doc_counts(session, {t[0] for t in tokens.values() if len(t) == 1})
        # A word the tokenizer splits in several tokens (or none) is counted as a phrase.
        per_term = "SELECT count(*) FROM episode_fts WHERE episode_fts MATCH :term"
        return n, [
            docs[tokens[t][0]]
            if len(tokens[t]) == 1
            else int(session.execute(text(per_term), {"term": fts5_match([t])}).scalar() or 0)
            for t in terms
        ]
    n = int(session.execute(text("SELECT count(*) FROM episode_fts")).scalar() or 0)
    per_term = "SELECT count(*) FROM episode_fts WHERE document @@ to_tsquery('english', :term)"
    return n, [
        int(session.execute(text(per_term), {"term": tsquery_text([t])}).scalar() or 0)
        for t in terms
    ]


# Per database: the index's state and the token document counts read in that state. The
# vocabulary counts a token's documents by reading its whole doclist (~0.5 ms for a word in 17k
# episodes), and a chat's common words come back turn after turn.
_doc_counts: dict[str, tuple[tuple[object, ...], dict[str, int]]] = {}
# FTS5's averages record (rowid 1: rows, then tokens per column) and structure record (rowid
# 10: its segments and a write counter) are rewritten by every commit that changes the index.
_INDEX_STATE = """SELECT (SELECT block FROM episode_fts_data WHERE id = 1),
    (SELECT block FROM episode_fts_data WHERE id = 10)"""


def _sqlite_doc_counts(session: Session, tokens: set[str]) -> tuple[int, dict[str, int]]:
    """(indexed episodes, {token: episodes holding it}), remembered while the index is
    unchanged (the read session's snapshot holds it still between the two reads). The number
    of episodes is the averages record's first field, as FTS5's own bm25() reads it: counting
    the docsize table instead read 100k rows a search (0.4 ms)."""
    state = tuple(session.execute(statement(_INDEX_STATE)).one())
    key = str(session.get_bind().engine.url)
    cached = _doc_counts.get(key)
    if cached is None or cached[0] != state:
        if len(_doc_counts) >= _DATABASES_CACHED:
            _doc_counts.clear()
        cached = _doc_counts[key] = (state, {})
    counts = cached[1]
    missing = {f"t{i}": t for i, t in enumerate(tokens - counts.keys())}
    if missing:
        if len(counts) + len(missing) > _TOKEN_CACHE_SIZE:
            counts.clear()
        sql = f"SELECT term, doc FROM episode_fts_vocab WHERE term IN ({', '.join(':' + k for k in missing)})"
        counts.update(dict.fromkeys(missing.values(), 0))
        counts.update({str(r.term): int(r.doc) for r in session.execute(text(sql), missing)})
    return indexed_rows(state[0]), {t: counts[t] for t in tokens}


def indexed_rows(averages: bytes | None) -> int:
    """The row count at the head of an FTS5 averages record (an SQLite varint: big-endian
    7-bit groups, the high bit set on all but the last; a 9th byte carries 8 bits). An empty
    index has no record: 0. Pure."""
    value = 0
    for at, byte in enumerate(averages or b""):
        if at == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value


def probe_contains(session: Session, terms: list[str], probe_id: int) -> list[bool]:
    """Whether episode `probe_id` contains each term (by the index's tokenizer). One statement:
    a cheap lookup per term (no bm25, the rowid pushed into FTS5)."""
    if not terms:
        return []
    params: dict[str, object] = {"probe": probe_id}
    checks = []
    for i, term in enumerate(terms):
        if is_sqlite(session):
            params[f"t{i}"] = fts5_match([term])
            checks.append(
                f"EXISTS (SELECT 1 FROM episode_fts WHERE episode_fts MATCH :t{i} AND rowid = :probe)"
            )
        else:
            params[f"t{i}"] = tsquery_text([term])
            checks.append(
                "EXISTS (SELECT 1 FROM episode_fts "
                f"WHERE episode_id = :probe AND document @@ to_tsquery('english', :t{i}))"
            )
    row = session.execute(statement(f"SELECT {', '.join(checks)}"), params).one()
    return [bool(v) for v in row]


def term_document_counts(
    session: Session, terms: list[str], probe_id: int
) -> tuple[int, list[tuple[int, bool]]]:
    """(indexed episodes, [(episodes containing the term, whether `probe_id` does)])."""
    total, counts = term_counts(session, terms)
    return total, list(zip(counts, probe_contains(session, terms, probe_id), strict=True))


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


def _idf(total: int, n: int) -> float:
    """BM25's idf, kept positive (as `coverage` weighs words)."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))


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
    is also a month ("June") is taken for the month — and PostgreSQL's stop words, found or not
    (that engine's parser drops them, SQLite's keeps them), so both engines weigh the same.
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
    """Each score as a share of the best one (BM25 and ts_rank scales differ and depend on the
    corpus), times the best match's `coverage`: so an episode that only shares a common word
    with the query stays near 0 however it ranks, and one holding all its rare words nears 1."""
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return {}
    return {i: min(max(s / best, 0.0), 1.0) * strength for i, s in scores.items()}
